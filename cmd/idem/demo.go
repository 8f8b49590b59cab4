// This file holds "idem demo": it starts the testserver with a fault mix, runs
// the worker (worker.go) as a child process, SIGKILLs it at random moments,
// restarts it, and proves from the server's ledger that every payment happened
// exactly once.

package main

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/idem-go/idem/testserver"
)

type demoConfig struct {
	n, conc, kills int
	seed           uint64
	faults         string
	journal        string
	attemptTimeout time.Duration
	killAfter      time.Duration // upper bound of a worker's random life before a kill
	budget         time.Duration // the whole demo gives up after this
	allKills       bool          // fail unless every kill happened (chaos)
	serverAddr     string        // where the testserver listens; "" for a free loopback port
	via            string        // host:port the worker sends to instead (a proxy); "" for the server
}

func runDemo(args []string) error {
	cfg := demoConfig{n: 200, conc: 8, kills: 3, seed: 1, faults: "default",
		attemptTimeout: time.Second, killAfter: 3 * time.Second, budget: 3 * time.Minute}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	cfg.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: idem demo [flags]\n\nProves exactly-once: payments through a faulty server, with the worker SIGKILLed and resumed.\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return runProof("demo", cfg)
}

// register defines cfg's flags, with cfg's values as their defaults.
func (cfg *demoConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&cfg.n, "n", cfg.n, "number of payments (operations)")
	fs.IntVar(&cfg.conc, "concurrency", cfg.conc, "payments in flight at once in the worker")
	fs.IntVar(&cfg.kills, "kills", cfg.kills, "SIGKILLs of the worker at random moments")
	fs.Uint64Var(&cfg.seed, "seed", cfg.seed, "seed for the fault plan and the kill times")
	fs.StringVar(&cfg.faults, "faults", cfg.faults, "fault mix, e.g. lost=0.1,503=0.05 (\"default\": "+testserver.DefaultMix+")")
	fs.StringVar(&cfg.journal, "journal", "", "journal file, which must not exist yet; kept after the run (default: a temporary file, deleted at the end)")
	fs.DurationVar(&cfg.attemptTimeout, "attempt-timeout", cfg.attemptTimeout, "worker's per-attempt timeout")
	fs.DurationVar(&cfg.killAfter, "kill-within", cfg.killAfter, "a killed worker lives a random time up to this")
	fs.DurationVar(&cfg.budget, "timeout", cfg.budget, "give up after this long")
	fs.StringVar(&cfg.serverAddr, "server-addr", "", "`host:port` for the fake server (default: a free loopback port)")
	fs.StringVar(&cfg.via, "via", "", "`host:port` the worker sends to instead of the server, e.g. a toxiproxy in front of -server-addr")
}

// runProof runs the payments through the faulty server and the worker's
// lives, then reports from the ledger; name is the subcommand, for messages.
func runProof(name string, cfg demoConfig) error {
	if cfg.n < 1 || cfg.conc < 1 || cfg.kills < 0 {
		return fmt.Errorf("%s: -n and -concurrency must be >= 1, -kills >= 0", name)
	}
	plan, err := testserver.ParsePlan(cfg.seed, cfg.faults)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(cfg.journal); cfg.journal != "" && err == nil && fi.Size() > 0 {
		// The worker skips what a journal shows settled, so an old journal
		// would hide every payment from this run's fresh server.
		return fmt.Errorf("%s: journal %s already exists; give a new path", name, cfg.journal)
	}
	if cfg.journal == "" {
		dir, err := os.MkdirTemp("", "idem-"+name+"-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.journal = filepath.Join(dir, name+".journal")
	}
	srvOpts := &testserver.Options{RequireKey: true, Plan: plan}
	srv, err := testserver.Listen(cmp.Or(cfg.serverAddr, "127.0.0.1:0"), srvOpts)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer srv.Close()
	url := srv.URL
	if cfg.via != "" {
		url = "http://" + cfg.via
	}
	fmt.Printf("idem %s: %d payments, concurrency %d, %d kills, seed %d\n", name, cfg.n, cfg.conc, cfg.kills, cfg.seed)
	fmt.Printf("  server  %s  faults %s\n  worker  sends to %s\n  journal %s\n", srv.URL, cfg.faults, url, cfg.journal)

	ctx, cancel := context.WithTimeout(context.Background(), cfg.budget)
	defer cancel()
	start := time.Now()
	st, err := runLives(ctx, cfg, url)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	wall := time.Since(start)
	if err := report(name, cfg, st, srv.Ledger(), wall); err != nil {
		return err
	}
	if cfg.allKills && st.kills < cfg.kills {
		return fmt.Errorf("%s: only %d of %d kills happened before the work was done; lower -kill-within or raise -n", name, st.kills, cfg.kills)
	}
	return nil
}

// lifeStats counts the worker's events over all its lives.
type lifeStats struct {
	mu       sync.Mutex
	kills    int
	lives    int
	resumed  int
	settled  map[string]bool
	errors   int
	finished bool
}

// runLives runs the worker, killing it cfg.kills times, then lets its last
// life finish.
func runLives(ctx context.Context, cfg demoConfig, url string) (*lifeStats, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 0x1de7))
	st := &lifeStats{settled: make(map[string]bool)}
	for life := 1; ; life++ {
		cmd := exec.CommandContext(ctx, exe, workerCommand, "-url", url, "-journal", cfg.journal,
			"-n", fmt.Sprint(cfg.n), "-concurrency", fmt.Sprint(cfg.conc),
			"-attempt-timeout", cfg.attemptTimeout.String())
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		st.lives++
		var after time.Duration
		stopKill := func() bool { return false }
		if st.kills < cfg.kills {
			after = cfg.killAfter/5 + time.Duration(rng.Int64N(int64(cfg.killAfter*4/5)+1))
			stopKill = time.AfterFunc(after, func() { cmd.Process.Signal(syscall.SIGKILL) }).Stop
		}
		read := make(chan struct{})
		go func() { st.read(out); close(read) }()
		st.progress(read, cfg.n)
		err = cmd.Wait()
		stopKill()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && ctx.Err() == nil {
			st.kills++
			fmt.Printf("  life %d: SIGKILL after %v, %d/%d settled so far\n", life, after.Round(time.Millisecond), st.settledCount(), cfg.n)
			continue
		}
		fmt.Printf("  life %d: ran to the end, %d/%d settled\n", life, st.settledCount(), cfg.n)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("gave up after %v", cfg.budget)
		}
		if err != nil || !st.finished {
			return nil, fmt.Errorf("worker failed: %v", err)
		}
		if st.kills < cfg.kills {
			fmt.Printf("  (the worker finished before kill %d; raise -n for more kills)\n", st.kills+1)
		}
		return st, nil
	}
}

func (s *lifeStats) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		s.mu.Lock()
		switch f[0] {
		case "resumed":
			s.resumed++
			if len(f) > 2 && strings.HasPrefix(f[2], "2") {
				s.settled[f[1]] = true
			}
		case "settled":
			s.settled[f[1]] = true
		case "error":
			s.errors++
			fmt.Println("  worker:", sc.Text())
		case "done":
			s.finished = true
		}
		s.mu.Unlock()
	}
}

// progress prints the settled count every second until done is closed.
func (s *lifeStats) progress(done <-chan struct{}, n int) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			fmt.Printf("    ... %d/%d settled\n", s.settledCount(), n)
		}
	}
}

func (s *lifeStats) settledCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.settled)
}

// report prints the table and fails unless every payment happened once.
func report(name string, cfg demoConfig, st *lifeStats, l testserver.Ledger, wall time.Duration) error {
	refs := make([]string, cfg.n)
	for i := range refs {
		refs[i] = reference(i)
	}
	lost := 0
	for _, r := range refs {
		if l.Effects[r] == 0 {
			lost++
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, v any) { fmt.Fprintf(tw, "%s\t%v\t\n", name, v) }
	fmt.Println()
	row("operations", cfg.n)
	row("attempts (server saw)", l.Requests)
	row("retries", l.Requests-cfg.n)
	row("worker lives", st.lives)
	row("SIGKILLs", st.kills)
	row("resumed", st.resumed)
	row("server replays", l.Replays)
	row("409 in progress", l.InProgress)
	for _, k := range sortedKeys(l.Faults) {
		row("fault "+k, l.Faults[k])
	}
	row("payments made", l.Payments())
	row("duplicates", len(l.Duplicates()))
	row("lost", lost)
	row("wall time", wall.Round(time.Millisecond))
	tw.Flush()
	if err := l.Check(refs); err != nil {
		return fmt.Errorf("%s: NOT exactly once: %w", name, err)
	}
	fmt.Println("\nexactly once: every payment has one effect on the server's ledger")
	return nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
