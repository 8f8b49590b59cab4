// This file holds "idem demo": the same payments, the same seeded fault plan
// and the same SIGKILLs, run twice, once through a plain retrying client and
// once through idem, then compared from each run's server ledger. The runs
// are demo_side.go, the printout demo_report.go and demo_story.go, the
// workers worker.go and worker_plain.go.

package main

import (
	"cmp"
	"context"
	"errors"
	"flag"

	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
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
	compare        bool          // run the plain client first, for the side-by-side
	serverAddr     string        // where the testserver listens; "" for a free loopback port
	servers        int           // fake servers behind a round-robin proxy (chaos); 0 or 1 for one
	serverStore    string        // the Store they share: "" in memory, or a postgres:// URL (serverstore.go)
	storeFaults    int           // faults of each kind on the servers' links to the store (nemesis.go); 0 for none
	via            string        // host:port the worker sends to instead (a proxy); "" for the server
	keyless        bool          // the server ignores keys; idem's side reconciles by reference
	net            *chaosNet     // chaos -netns: the namespaces the parts run in (netns.go); nil for none
	soak           *soakConfig   // chaos -duration (soak.go); nil for a run of n payments
}

// keylessMix is the default fault mix against a server that ignores keys: DefaultMix but
// the hold, which keeps a payment in flight at the server while the client gives up and
// looks it up, so that no look-up can see it: a provider that answers a look-up without
// the payments in flight cannot be reconciled with, keys or not.
const keylessMix = "lost=0.06,drop=0.04,reset=0.03,503=0.04,503date=0.02,429=0.04,429date=0.02,500=0.03,slow=0.03"

// errInterrupted is returned after Ctrl-C (SIGINT) or SIGTERM, once the
// summary so far is printed; main exits 130.
var errInterrupted = errors.New("interrupted")

func runDemo(args []string) error {
	cfg := demoConfig{n: 200, conc: 8, kills: 3, seed: 1, faults: "default", compare: true,
		attemptTimeout: time.Second, killAfter: 3 * time.Second, budget: 3 * time.Minute}
	fs := newFlags("demo", "[flags]",
		"Sends payments to a fake payments server that injects faults, SIGKILLs the sending\n"+
			"process at random moments and restarts it: first through a plain retrying client,\n"+
			"then through idem, with the same faults and kills. Prints, from the server's ledger,\n"+
			"how many payments each made once, twice or more, or never. Exits 0 only when idem\n"+
			"made every payment exactly once. About 25 s at the defaults; -compare=false skips\n"+
			"the plain client.")
	cfg.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs.Name(), "unexpected arguments %q", fs.Args())
	}
	return runProof("demo", cfg)
}

// register defines cfg's flags, with cfg's values as their defaults.
func (cfg *demoConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&cfg.n, "n", cfg.n, "number of payments (operations)")
	fs.IntVar(&cfg.conc, "concurrency", cfg.conc, "payments in flight at once in the worker")
	fs.IntVar(&cfg.kills, "kills", cfg.kills, "SIGKILLs of the worker at random moments")
	fs.Uint64Var(&cfg.seed, "seed", cfg.seed, "seed for the fault plan and the kill times")
	fs.StringVar(&cfg.faults, "faults", cfg.faults, "fault `mix`, e.g. lost=0.1,503=0.05 (\"default\": "+testserver.DefaultMix+")")
	fs.StringVar(&cfg.journal, "journal", "", "journal `file`, which must not exist yet; kept after the run (default: a temporary file, deleted at the end); chaos also takes a postgres:// URL (see -workers)")
	fs.DurationVar(&cfg.attemptTimeout, "attempt-timeout", cfg.attemptTimeout, "worker's per-attempt timeout")
	fs.DurationVar(&cfg.killAfter, "kill-within", cfg.killAfter, "a killed worker lives a random time up to this")
	fs.DurationVar(&cfg.budget, "timeout", cfg.budget, "give up after this long")
	fs.BoolVar(&cfg.compare, "compare", cfg.compare, "first run the same payments, faults and kills through a plain retrying client (no idem), for comparison")
	fs.StringVar(&cfg.serverAddr, "server-addr", "", "`host:port` for the fake server (default: a free loopback port)")
	fs.StringVar(&cfg.via, "via", "", "`host:port` the worker sends to instead of the server, e.g. a toxiproxy in front of -server-addr")
	fs.BoolVar(&cfg.keyless, "keyless", false, "the fake server ignores idempotency keys (every POST charges) and answers\n"+
		"GET /payments?reference=…; idem looks a payment up by its reference before it sends it again\n"+
		"(Options.Reconcile). -compare runs idem without Reconcile first, in place of the plain client.\n"+
		"The default -faults leave out the hold ("+keylessMix+")")
}

// runProof runs the payments through the faulty server and the worker's
// lives, then reports from the ledger; name is the subcommand, for messages.
func runProof(name string, cfg demoConfig) error {
	if cfg.n < 1 || cfg.conc < 1 || cfg.kills < 0 || cfg.attemptTimeout <= 0 || cfg.killAfter <= 0 || cfg.budget <= 0 {
		return usageError("idem "+name, "-n and -concurrency must be >= 1, -kills >= 0, durations > 0")
	}
	if cfg.keyless && cfg.faults == "default" {
		cfg.faults = keylessMix
	}
	if _, err := testserver.ParsePlan(cfg.seed, cfg.faults); err != nil {
		return usageError("idem "+name, "-faults: %v", err)
	}
	if isPostgres(cfg.journal) {
		return usageError("idem "+name, "a postgres:// -journal is for idem chaos (a fleet of workers)")
	}
	if fi, err := os.Stat(cfg.journal); cfg.journal != "" && err == nil && fi.Size() > 0 {
		// The worker skips what a journal shows settled, so an old journal
		// would hide every payment from this run's fresh server.
		return usageError("idem "+name, "-journal %s already exists; give a new path", cfg.journal)
	}
	if cfg.compare && (cfg.serverAddr != "" || cfg.via != "") {
		cfg.compare = false
		fmt.Println("(-server-addr and -via run idem alone: the plain client would need a server of its own)")
	}
	dir, err := os.MkdirTemp("", "idem-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if cfg.journal == "" {
		cfg.journal = filepath.Join(dir, name+".journal")
	}

	// Ctrl-C or SIGTERM ends the run; the summary so far is still printed and
	// the temporary directory removed before main exits 130.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, cfg.budget)
	defer cancel()

	what := fmt.Sprintf("%d payments", cfg.n)
	if cfg.soak != nil {
		what = "a soak: new payments for " + cfg.soak.duration.String()
	}
	fmt.Printf("idem %s: %s, %d at a time, %d SIGKILLs of the sending process, seed %d, faults %s\n",
		name, what, cfg.conc, cfg.kills, cfg.seed, cfg.faults)
	var sides []*side
	defer func() {
		for _, s := range sides {
			s.srv.Close()
		}
	}()
	plans := []struct {
		label            string
		plain, reconcile bool
		state            string
	}{{"without idem", true, false, filepath.Join(dir, "plain-done.txt")}, {"with idem", false, false, cfg.journal}}
	if cfg.keyless {
		plans[0].label, plans[0].plain, plans[0].state = "idem, no Reconcile", false, filepath.Join(dir, "no-reconcile.journal")
		plans[1].label, plans[1].reconcile = "idem with Reconcile", true
	}
	if !cfg.compare {
		plans = plans[1:]
	}
	for i, p := range plans {
		s, err := newSide(p.label, p.plain, p.reconcile, p.state, cfg)
		if err != nil {
			return err
		}
		sides = append(sides, s)
		fmt.Printf("\n[%d/%d] %s: %s\n", i+1, len(plans), p.label, s.describe(cfg))
		s.srv.startStoreFaults(s.start)
		stopSoak := s.startSoak()
		err = s.runLives(ctx, cfg)
		s.srv.stopStoreFaults()
		if serr := stopSoak(); err == nil {
			err = serr
		}
		if s.soak != nil {
			cfg.n = s.soakPayments() // what the report checks, interrupted or not
		}
		switch {
		case sigCtx.Err() != nil:
			fmt.Printf("\ninterrupted after %v: the summary so far (unfinished payments count as never made)\n",
				time.Since(sides[0].start).Round(time.Millisecond))
			report(cfg, sides, false)
			return errInterrupted
		case ctx.Err() != nil:
			return fmt.Errorf("gave up after %v (-timeout)", cfg.budget)
		case err != nil:
			return fmt.Errorf("%s: %w", p.label, err)
		}
		s.srv.settleStore(ctx)
	}
	if err := report(cfg, sides, true); err != nil {
		return err
	}
	if last := sides[len(sides)-1]; cfg.allKills && last.kills < cfg.kills {
		return fmt.Errorf("only %d of %d kills happened before the work was done; lower -kill-within or raise -n", last.kills, cfg.kills)
	}
	return nil
}

// listenAddr is where a side's server listens: -server-addr for idem's, a
// free loopback port otherwise.
func listenAddr(cfg demoConfig, plain bool) string {
	if plain {
		return "127.0.0.1:0"
	}
	return cmp.Or(cfg.serverAddr, "127.0.0.1:0")
}
