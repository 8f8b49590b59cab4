// This file holds "idem chaos": the demo (demo.go) at scale, as evidence
// rather than a show. Thousands of payments at high concurrency go through the
// testserver's mixed fault plan while the worker (worker.go) is SIGKILLed at
// dozens of random moments; the run fails unless the server's ledger shows
// every payment exactly once and every kill happened.

package main

import (
	"flag"
	"time"
)

func runChaos(args []string) error {
	cfg := demoConfig{n: 2000, conc: 32, kills: 30, seed: 1, faults: "default",
		attemptTimeout: time.Second, killAfter: 1500 * time.Millisecond, budget: 15 * time.Minute, allKills: true}
	fs := newFlags("chaos", "[flags]",
		"Proves exactly-once at scale: many payments through the mixed fault plan, the worker\n"+
			"SIGKILLed at many random moments. Exits non-zero unless every payment has exactly one\n"+
			"effect on the server's ledger and every kill happened. Takes about 40 seconds at its defaults.\n"+
			"With -journal postgres://… and -workers N, N workers share a PostgreSQL journal: they\n"+
			"are SIGKILLed at random, one is killed for good, -restart-db restarts the database once.\n"+
			"With -duration D, a soak: new payments for D, the SIGKILLs spread over it, and the run's\n"+
			"health (heap, goroutines, open files, journal size, commit latency) drawn in a chart.")
	cfg.register(fs)
	fc := fleetConfig{workers: 1, lease: 2 * time.Second}
	fs.IntVar(&fc.workers, "workers", fc.workers, "worker processes sharing the journal: 2 or more with a postgres:// -journal (a fleet: one is killed for good)")
	fs.DurationVar(&fc.lease, "lease", fc.lease, "with a postgres:// -journal: the journal's lease, which bounds the time to adopt a dead worker's operations")
	fs.IntVar(&cfg.servers, "servers", 1, "fake servers behind a round-robin TCP proxy, sharing one idempotency store (-server-store)")
	fs.StringVar(&cfg.serverStore, "server-store", "", "the `store` the fake servers share: a redis:// URL, a postgres:// URL (its schema parameter names the schema), or nothing for one in memory")
	fs.IntVar(&cfg.storeFaults, "store-faults", -1, "faults of each kind (reset after write, replies held, partition) on the servers' links to a redis:// or\n"+
		"postgres:// -server-store, one link at a time at moments drawn from -seed; the run also fails if a key is left\n"+
		"in progress in the store after the final heal. -1 means 3 with -servers 2 or more, else none; 0 turns them off")
	fs.StringVar(&fc.restartDB, "restart-db", "", "with a postgres:// -journal: a shell `command` that restarts PostgreSQL, run once half way through")
	netns := fs.Bool("netns", false, "put each part in a network namespace of its own (needs root and ip(8)): the workers, the servers, the proxy,\n"+
		"and PostgreSQL or Redis behind link proxies; the nemesis then partitions links both ways and one way, drops\n"+
		"packets and slows links, -store-faults rounds of 5 (default 3). With -workers N and a postgres:// -journal,\n"+
		"or -servers 2 or more and a redis:// or postgres:// -server-store; -n is 3000 unless given (chaos_netns.go)")
	var soak soakConfig
	registerSoak(fs, &soak)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs.Name(), "unexpected arguments %q", fs.Args())
	}
	if *netns {
		nSet := false
		fs.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
		cleanup, err := setUpNetns(&cfg, fc.workers, nSet)
		if err != nil {
			return err
		}
		defer cleanup()
	}
	if err := soak.apply(fs, &cfg); err != nil {
		return err
	}
	switch {
	case cfg.storeFaults < 0 && cfg.servers > 1 && cfg.serverStore != "":
		cfg.storeFaults = 3
	case cfg.storeFaults < 0 && cfg.net != nil:
		cfg.storeFaults = 3
	case cfg.storeFaults < 0:
		cfg.storeFaults = 0
	case cfg.storeFaults > 0 && cfg.serverStore == "" && cfg.net == nil:
		return usageError(fs.Name(), "-store-faults needs a redis:// or postgres:// -server-store: an in-memory store has no link to fault")
	}
	if isPostgres(cfg.journal) {
		fc.demoConfig = cfg
		return runFleetChaos(fc)
	}
	if fc.workers != 1 || fc.restartDB != "" {
		return usageError(fs.Name(), "-workers and -restart-db need a postgres:// -journal: a journal file has one writer")
	}
	return runProof("chaos", cfg)
}
