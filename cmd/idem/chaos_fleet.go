// This file holds "idem chaos -journal postgres://… -workers N": the chaos
// run on a fleet. N worker processes (worker_fleet.go) share one
// PostgreSQL journal and send the same payments through the fault plan;
// they are SIGKILLed at random and restarted, one of them is killed for
// good a third of the way in, and PostgreSQL is restarted once half way
// (-restart-db). The run fails unless the server's ledger shows every
// payment exactly once. chaos_adopt.go counts what survivors adopted.

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/idem-go/idem/testserver"
)

// fleetConfig is chaos's configuration on a fleet.
type fleetConfig struct {
	demoConfig
	workers   int
	lease     time.Duration
	restartDB string // a shell command that restarts the database; "" for none
}

// fleet is one chaos run on a fleet.
type fleet struct {
	cfg        fleetConfig
	journalURL string // with its schema and namespace
	srv        *cluster
	start      time.Time
	exe        string

	mu        sync.Mutex
	procs     map[int]*fleetProc // by slot: the live process
	gone      map[int]bool       // slots killed for good
	kills     int
	goneAt    time.Duration
	restarted string // what -restart-db did, for the report
	errors    int
	adoption            // chaos_adopt.go
	net       *fleetNet // chaos -netns (chaos_fleet_net.go); nil for none
}

// fleetProc is one life of one worker slot.
type fleetProc struct {
	name     string // "w2.3": slot 2, life 3
	slot     int
	cmd      *exec.Cmd
	killedAt time.Time
	finished bool
}

func runFleetChaos(cfg fleetConfig) error {
	switch {
	case cfg.workers < 2:
		return usageError("idem chaos", "-workers must be at least 2 on a fleet: one is killed for good")
	case cfg.n < 1 || cfg.conc < 1 || cfg.kills < 0 || cfg.attemptTimeout <= 0 || cfg.killAfter <= 0 || cfg.budget <= 0 || cfg.lease < time.Second:
		return usageError("idem chaos", "-n and -concurrency must be >= 1, -kills >= 0, durations > 0, -lease >= 1s")
	}
	if _, err := testserver.ParsePlan(cfg.seed, cfg.faults); err != nil {
		return usageError("idem chaos", "-faults: %v", err)
	}
	var err error
	f := &fleet{cfg: cfg, procs: map[int]*fleetProc{}, gone: map[int]bool{}, adoption: newAdoption()}
	if f.journalURL, err = freshNamespace(cfg.journal); err != nil {
		return err
	}
	if f.exe, err = os.Executable(); err != nil {
		return err
	}
	f.srv, err = newCluster(listenAddr(cfg.demoConfig, false), max(cfg.servers, 1), cfg.serverStore,
		testserver.Options{RequireKey: true}, cfg.seed, cfg.faults, cfg.storeFaults, cfg.net)
	if err != nil {
		return err
	}
	defer f.srv.Close()
	if err := f.setUpNet(); err != nil {
		return err
	}
	defer f.closeNet()
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, cfg.budget)
	defer cancel()

	fmt.Printf("idem chaos on a fleet: %d payments, %d workers of %d at a time, %d SIGKILLs and one worker killed for good, seed %d, faults %s\n",
		cfg.n, cfg.workers, cfg.conc, cfg.kills, cfg.seed, cfg.faults)
	fmt.Printf("journal %s (lease %v); server %s\n", displayName(f.journalURL), cfg.lease, f.srv.describe())
	f.start = time.Now()
	f.srv.startStoreFaults(f.start)
	f.startNetFaults()
	errs := make(chan error, cfg.workers)
	for slot := range cfg.workers {
		go func() { errs <- f.runSlot(ctx, slot) }()
	}
	chaosDone := make(chan struct{})
	go f.chaos(ctx, chaosDone)
	var firstErr error
	for range cfg.workers {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	close(chaosDone)
	f.srv.stopStoreFaults()
	f.stopNetFaults()
	wall := time.Since(f.start)
	switch {
	case sigCtx.Err() != nil:
		return errInterrupted
	case ctx.Err() != nil && firstErr == nil:
		return fmt.Errorf("gave up after %v (-timeout)", cfg.budget)
	case firstErr != nil:
		return firstErr
	}
	f.srv.settleStore(ctx)
	f.checkJournal(ctx)
	return f.report(wall)
}

// freshNamespace returns the journal URL with a namespace this run owns: the
// URL's own if it names one that holds no operation, a new one otherwise.
func freshNamespace(journalURL string) (string, error) {
	t, err := parsePostgres(journalURL)
	if err != nil {
		return "", usageError("idem chaos", "-journal: %v", err)
	}
	if t.opts.Namespace == "" {
		t.opts.Namespace = fmt.Sprintf("chaos-%s-%s", time.Now().UTC().Format("20060102-150405"), uuid.NewString()[:8])
	} else {
		recs, err := t.records(context.Background(), false)
		if err != nil && !errors.Is(err, pgjournal.ErrNoJournal) {
			return "", err
		}
		if len(recs) > 0 {
			// Workers skip what the journal holds: an old run's operations
			// would hide payments from this run's fresh server.
			return "", usageError("idem chaos", "namespace %q already holds %d operations; name a new one, or none", t.opts.Namespace, len(recs))
		}
	}
	u, _ := url.Parse(journalURL)
	q := u.Query()
	q.Set("namespace", t.opts.Namespace)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// runSlot runs one worker slot's lives until one finishes its work, or the
// slot is killed for good.
func (f *fleet) runSlot(ctx context.Context, slot int) error {
	for life := 1; ; life++ {
		args := append([]string{workerCommand, "-url", f.srv.URL, "-journal", f.journalFor(slot), "-n", fmt.Sprint(f.cfg.n),
			"-concurrency", fmt.Sprint(f.cfg.conc), "-attempt-timeout", f.cfg.attemptTimeout.String()},
			fleetArgs(slot, f.cfg.workers, f.cfg.lease)...)
		cmd := exec.CommandContext(ctx, f.exe, args...)
		if f.cfg.net != nil {
			cmd = f.cfg.net.workerCommand(ctx, slot, f.exe, args...)
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		p := &fleetProc{name: fmt.Sprintf("w%d.%d", slot+1, life), slot: slot, cmd: cmd}
		f.mu.Lock()
		if f.gone[slot] {
			f.mu.Unlock()
			return nil
		}
		err = cmd.Start()
		if err == nil {
			f.procs[slot] = p
		}
		f.mu.Unlock()
		if err != nil {
			return err
		}
		f.read(p, out)
		err = cmd.Wait()
		f.mu.Lock()
		delete(f.procs, slot)
		killed := !p.killedAt.IsZero()
		f.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case killed:
			f.orphan(p.name, p.slot, p.killedAt)
			if f.isGone(slot) {
				return nil
			}
		case err != nil || !p.finished:
			return fmt.Errorf("worker %s failed: %v", p.name, err)
		default:
			return nil
		}
	}
}

func (f *fleet) isGone(slot int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone[slot]
}

// read counts one worker process's event lines (worker.go and
// worker_fleet.go list them) until it exits.
func (f *fleet) read(p *fleetProc, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		f.srv.clock.observe(fl)
		switch {
		case len(fl) == 1 && fl[0] == "done":
			p.finished = true
		case len(fl) >= 4 && fl[0] == "attempt":
			f.attempt(p.name, p.slot, fl[1], fl[2], fl[3])
		case len(fl) >= 3 && (fl[0] == "settled" || fl[0] == "resumed") && isStatus(fl[2]):
			f.settled(strings.TrimSuffix(fl[1], "/charge"))
		case fl[0] == "error":
			f.mu.Lock()
			f.errors++
			if f.errors <= 5 {
				fmt.Printf("  worker %s: %s\n", p.name, sc.Text())
			}
			f.mu.Unlock()
		}
	}
}

// chaos kills workers at random moments until cfg.kills have died, kills
// the last slot for good a third of the way in, and restarts the database
// half way, until done is closed.
func (f *fleet) chaos(ctx context.Context, done <-chan struct{}) {
	rng := rand.New(rand.NewPCG(f.cfg.seed, 0xf1ee7))
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	next := time.Now().Add(f.killDelay(rng))
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			f.progress()
		case <-time.After(time.Until(next)):
			if f.kill(rng, -1) {
				next = time.Now().Add(f.killDelay(rng))
			} else {
				next = time.Now().Add(100 * time.Millisecond)
			}
		}
		settled := f.settledCount()
		if settled >= f.cfg.n/3 && !f.isGone(f.cfg.workers-1) {
			f.kill(rng, f.cfg.workers-1)
		}
		if settled >= f.cfg.n/2 && f.cfg.restartDB != "" && f.restartedOnce() {
			go f.restartDB(ctx)
		}
	}
}

func (f *fleet) killDelay(rng *rand.Rand) time.Duration {
	k := f.cfg.killAfter
	return k/5 + time.Duration(rng.Int64N(int64(k*4/5)+1))
}

// kill SIGKILLs the live process of slot, or of a slot drawn at random if
// slot is -1 (then only while kills are left); slot is then gone for good.
// It reports whether it killed one.
func (f *fleet) kill(rng *rand.Rand, slot int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slot < 0 {
		if f.kills >= f.cfg.kills {
			return false
		}
		var live []int
		for s, p := range f.procs {
			if !f.gone[s] && p.killedAt.IsZero() {
				live = append(live, s)
			}
		}
		if len(live) == 0 {
			return false
		}
		slot = live[rng.IntN(len(live))]
		f.kills++
	} else {
		f.gone[slot] = true
		f.goneAt = time.Since(f.start)
	}
	p := f.procs[slot]
	if p == nil || !p.killedAt.IsZero() {
		return slot >= 0 && p == nil // a slot gone between lives stays gone
	}
	p.killedAt = time.Now()
	p.cmd.Process.Signal(syscall.SIGKILL)
	if f.gone[slot] {
		fmt.Printf("  SIGKILL of worker %s for good after %.1fs: its leases run out, the others adopt its operations\n", p.name, f.goneAt.Seconds())
	}
	return true
}

// restartedOnce reports whether the database restart is to start now: true
// once.
func (f *fleet) restartedOnce() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.restarted != "" {
		return false
	}
	f.restarted = "running"
	return true
}

func (f *fleet) restartDB(ctx context.Context) {
	at := time.Since(f.start)
	fmt.Printf("  restarting the database after %.1fs: %s\n", at.Seconds(), f.cfg.restartDB)
	t0 := time.Now()
	out, err := exec.CommandContext(ctx, "sh", "-c", f.cfg.restartDB).CombinedOutput()
	what := fmt.Sprintf("restarted after %.1fs, in %.1fs", at.Seconds(), time.Since(t0).Seconds())
	if err != nil {
		what = fmt.Sprintf("FAILED after %.1fs: %v: %s", at.Seconds(), err, strings.TrimSpace(string(out)))
	}
	fmt.Printf("  database %s\n", what)
	f.mu.Lock()
	f.restarted = what
	f.mu.Unlock()
}

// progress prints one line on how far the run is.
func (f *fleet) progress() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Printf("    %5.1fs  %d/%d settled; %d/%d workers up; %d/%d SIGKILLs; %d adopted from dead processes\n",
		time.Since(f.start).Seconds(), len(f.done), f.cfg.n, len(f.procs), f.cfg.workers, f.kills, f.cfg.kills, f.adopted)
}
