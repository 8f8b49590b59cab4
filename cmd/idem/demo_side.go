// This file runs one side of the demo (demo.go): a fresh fake server with the
// seeded fault plan, and the worker's lives, each SIGKILLed at a seeded random
// moment but the last. It counts the worker's events, says in its progress
// lines what the run waits for, and keeps the timeline that demo_story.go
// tells one payment's story from.

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idem-go/idem/testserver"
)

// side is one run of the payments: through idem or through the plain client.
type side struct {
	label     string // "with idem" or "without idem"
	plain     bool
	reconcile bool   // idem's worker looks a payment up by reference before sending it again
	state     string // the journal, or the plain worker's to-do file
	srv       *cluster
	net       *chaosNet // chaos -netns: the worker runs in its namespace; nil for none
	url       string
	soak      *soakRun // nil unless chaos -duration (soak.go)
	start     time.Time
	wall      time.Duration

	mu         sync.Mutex
	life       int
	phase      string // the worker's last "phase" line in this life
	unfinished int    // what the last life left unfinished
	kills      int
	resumed    int
	finished   bool
	settled    opSet // by operation ID: final answer, or given up (plain)
	gaveup     map[string]bool
	pending    map[string]bool // outcome unknown, waiting in the journal
	inflight   map[string]bool // started in this life, not finished
	byRef      map[string][]event
	byKey      map[string][]event // faults before processing: their key, not yet a reference
	killed     []event
}

// event is one line of the timeline: something the server or a worker did.
type event struct {
	at    time.Duration // since the side's start
	life  int
	who   string // "server" or "worker"
	what  string // server: new, replay, in progress, ...; worker: its event word
	key   string
	fault string // server: the fault the request met, "none" for none
	rest  []string
}

// serverLine matches the fake server's log line for a keyed POST /payments,
// and faultLine its line for a fault that acted before processing.
var (
	serverLine = regexp.MustCompile(`^POST /payments key "([^"]*)" reference "([^"]*)": ([a-z ]+), (\S+)`)
	faultLine  = regexp.MustCompile(`^POST /payments key "([^"]+)": (.*) before processing$`)
)

func newSide(label string, plain, reconcile bool, state string, cfg demoConfig) (*side, error) {
	s := &side{label: label, plain: plain, reconcile: reconcile, state: state, start: time.Now(),
		gaveup: map[string]bool{}, pending: map[string]bool{},
		inflight: map[string]bool{}, byRef: map[string][]event{}, byKey: map[string][]event{}}
	n, store, storeFaults := max(cfg.servers, 1), cfg.serverStore, cfg.storeFaults
	if plain {
		n, store, storeFaults = 1, "", 0
	}
	opts := testserver.Options{RequireKey: true, IgnoreKeys: cfg.keyless, Logf: s.serverLog, KeyTTL: cfg.soak.serverKeyTTL()}
	if cfg.soak != nil {
		s.soak = &soakRun{cfg: cfg.soak}
	}
	var err error
	if plain {
		cfg.net = nil
	}
	s.net = cfg.net
	if s.srv, err = newCluster(listenAddr(cfg, plain), n, store, opts, cfg.seed, cfg.faults, storeFaults, cfg.net); err != nil {
		return nil, err
	}
	s.url = s.srv.URL
	if cfg.via != "" && !plain {
		s.url = "http://" + cfg.via
	}
	return s, nil
}

// describe says what this side runs, for its heading.
func (s *side) describe(cfg demoConfig) string {
	if s.plain {
		return "net/http with a retry loop, a fresh idempotency key per attempt, and a file of\n" +
			"  payments done; server " + s.srv.describe()
	}
	how := "each payment journaled with its key before sending, retried and resumed with\n" +
		"  the same key; server " + s.srv.describe() + ", journal " + s.state
	switch {
	case cfg.keyless && s.reconcile:
		how += "\n  the server ignores keys: a payment that may have arrived is looked up by its reference\n" +
			"  (GET /payments?reference=…) before idem sends it again"
	case cfg.keyless:
		how += "\n  the server ignores keys, and nothing looks a payment up: a re-send charges again"
	}
	return how
}

func (s *side) serverLog(format string, args ...any) {
	if s.soak != nil {
		return // a soak keeps no timeline: it would grow with every payment
	}
	line := fmt.Sprintf(format, args...)
	if m := faultLine.FindStringSubmatch(line); m != nil {
		s.mu.Lock()
		s.byKey[m[1]] = append(s.byKey[m[1]], event{at: time.Since(s.start), life: s.life, who: "server", what: "fault", key: m[1], fault: m[2]})
		s.mu.Unlock()
		return
	}
	if m := serverLine.FindStringSubmatch(line); m != nil {
		s.add(m[2], event{who: "server", what: m[3], key: m[1], fault: m[4]})
	}
}

// add appends ev to ref's timeline, stamped now unless it has its time.
func (s *side) add(ref string, ev event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.soak != nil {
		return
	}
	if ev.at == 0 {
		ev.at = time.Since(s.start)
	}
	ev.life = s.life
	s.byRef[ref] = append(s.byRef[ref], ev)
}

// runLives runs the worker, killing it cfg.kills times, then lets its last
// life finish. It returns ctx's error if ctx ends first.
func (s *side) runLives(ctx context.Context, cfg demoConfig) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 0x1de7)) // the same kill times on both sides
	for life := 1; ; life++ {
		args := []string{workerCommand, "-url", s.url, "-journal", s.state, "-n", fmt.Sprint(cfg.n),
			"-concurrency", fmt.Sprint(cfg.conc), "-attempt-timeout", cfg.attemptTimeout.String()}
		if s.plain {
			args = append(args, "-plain")
		}
		if s.reconcile {
			args = append(args, "-reconcile")
		}
		args = append(args, s.soakArgs()...)
		cmd := exec.CommandContext(ctx, exe, args...)
		if s.net != nil {
			cmd = s.net.workerCommand(ctx, 0, exe, args...)
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		unfinished := s.newLife(life)
		if life > 1 {
			if s.plain {
				fmt.Printf("  life %d: a new process sends again, with fresh keys, the %s its file does not show done, then the rest\n",
					life, count(unfinished, "unfinished payment"))
			} else {
				fmt.Printf("  life %d: a new process resumes the journal's %s with their keys, then sends the rest\n",
					life, count(unfinished, "pending payment"))
			}
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		var killAt time.Time
		stopKill := func() bool { return false }
		if s.kills < cfg.kills {
			after := cfg.killAfter/5 + time.Duration(rng.Int64N(int64(cfg.killAfter*4/5)+1))
			killAt = time.Now().Add(after)
			stopKill = time.AfterFunc(after, func() { cmd.Process.Signal(syscall.SIGKILL) }).Stop
		}
		lifeStart := time.Now()
		read := make(chan struct{})
		go func() { s.read(out); close(read) }()
		s.progress(read, cfg.n, killAt)
		err = cmd.Wait()
		stopKill()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			s.mu.Lock()
			s.kills++
			s.killed = append(s.killed, event{at: time.Since(s.start), life: life, who: "kill"})
			done, inflight, pending := s.settled.len(), len(s.inflight), len(s.pending)
			s.mu.Unlock()
			fmt.Printf("  SIGKILL %d/%d after %v of life %d: %d%s done, %d in flight, %d pending\n", s.kills, cfg.kills,
				time.Since(lifeStart).Round(time.Millisecond), life, done, s.outOf(cfg), inflight, pending)
			continue
		}
		s.wall = time.Since(s.start)
		if err != nil || !s.finished {
			return fmt.Errorf("worker failed: %v", err)
		}
		fmt.Printf("  life %d ran to the end: %d%s done after %v\n", life, s.doneCount(), s.outOf(cfg), s.wall.Round(time.Millisecond))
		if s.kills < cfg.kills {
			fmt.Printf("  (the worker finished before kill %d; raise -n for more kills)\n", s.kills+1)
		}
		return nil
	}
}

// newLife starts counting life n and returns how many operations the last
// life left unfinished.
func (s *side) newLife(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.life, s.phase = n, ""
	if s.plain {
		s.unfinished = len(s.inflight) // re-sent from the file of payments done
	} else {
		for op := range s.inflight { // written ahead: pending in the journal
			s.pending[op] = true
		}
		s.unfinished = len(s.pending)
	}
	clear(s.inflight)
	return s.unfinished
}

// read counts the worker's event lines (worker.go lists them).
func (s *side) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			if len(f) == 1 && f[0] == "done" {
				s.mu.Lock()
				s.finished = true
				s.mu.Unlock()
			}
			continue
		}
		word, op := f[0], f[1]
		s.srv.clock.observe(f)
		s.mu.Lock()
		if s.soakLine(f) {
			s.mu.Unlock()
			continue
		}
		switch {
		case word == "phase":
			s.phase = op
			s.mu.Unlock()
			continue
		case word == "start":
			s.inflight[op] = true
		case word == "settled", word == "resumed" && len(f) > 2 && isStatus(f[2]):
			s.settled.add(op)
			delete(s.inflight, op)
			delete(s.pending, op)
		case word == "gaveup":
			s.settled.add(op)
			s.gaveup[op] = true
			delete(s.inflight, op)
		case word == "pending", word == "resumed" && len(f) > 2 && f[2] == "pending":
			s.pending[op] = true
			delete(s.inflight, op)
		case word == "error":
			fmt.Println("  worker:", sc.Text())
		}
		if word == "resumed" {
			s.resumed++
		}
		s.mu.Unlock()
		ev := event{who: "worker", what: word, rest: f[2:]}
		if ns, err := strconv.ParseInt(f[len(f)-1], 10, 64); word == "start" && err == nil {
			// The line came through a pipe, maybe after the server logged the
			// request it announces: the worker's own clock orders it right.
			ev.at = time.Unix(0, ns).Sub(s.start)
		}
		s.add(strings.TrimSuffix(op, "/charge"), ev)
	}
}

func (s *side) doneCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled.len()
}

// progress prints, every second until done is closed, how far the run is
// and what it waits for.
func (s *side) progress(done <-chan struct{}, n int, killAt time.Time) {
	if s.soak != nil {
		<-done // the soak's sampler prints its own lines
		return
	}
	tickUntil(done, time.Second, func() {
		s.mu.Lock()
		settled, wait := s.settled.len(), s.waitingFor()
		s.mu.Unlock()
		line := fmt.Sprintf("    %5.1fs  %d/%d done; waiting for %s", time.Since(s.start).Seconds(), settled, n, wait)
		if !killAt.IsZero() {
			line += fmt.Sprintf("; next SIGKILL in %.1fs", max(time.Until(killAt).Seconds(), 0))
		}
		fmt.Println(line)
	})
}

// tickUntil calls fn every interval until done is closed.
func tickUntil(done <-chan struct{}, every time.Duration, fn func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			fn()
		}
	}
}

// waitingFor says what the run waits for now, from the worker's phase. The
// caller holds s.mu.
func (s *side) waitingFor() string {
	inflight, pending := len(s.inflight), len(s.pending)
	switch s.phase {
	case "":
		return fmt.Sprintf("life %d's process to start and open its %s", s.life, map[bool]string{true: "file of payments done", false: "journal"}[s.plain])
	case "resuming":
		how := "same keys; 409 while the server still holds one"
		if s.reconcile {
			how = "each looked up by its reference first"
		}
		return fmt.Sprintf("life %d to resume the journal's %s (%s)", s.life, count(s.unfinished, "pending payment"), how)
	case "finishing":
		return fmt.Sprintf("%s to come due and be resumed (a server's Retry-After, or backoff)", count(pending, "pending payment"))
	}
	var wait []string
	if inflight > 0 {
		wait = append(wait, fmt.Sprintf("%s in flight (an answer, or a retry's backoff)", count(inflight, "payment")))
	}
	if pending > 0 {
		wait = append(wait, fmt.Sprintf("%s pending in the journal until their retry time", count(pending, "payment")))
	}
	if len(wait) == 0 {
		return "the worker to pick the next payments"
	}
	return strings.Join(wait, " and ")
}

// count says "1 payment" or "2 payments".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// isStatus reports whether s is an HTTP status code, as the worker prints it.
func isStatus(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 100 && n <= 599
}
