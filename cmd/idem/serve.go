// serve.go is "idem serve": the testserver standalone, on a fixed address, until SIGINT or
// SIGTERM, then a summary of its ledger. The server itself is package testserver. With
// -pidfile it writes its own process ID, which a script stops it by: under "go run" the PID
// a shell has is the go command's, and a SIGTERM to it leaves the server running.

package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/idem-go/idem/testserver"
)

// runServe runs "idem serve [flags]". It prints the server's URL, serves until SIGINT or
// SIGTERM, closes the server and prints the ledger. -h returns flag.ErrHelp.
func runServe(args []string) error {
	fs := newFlags("serve", "[flags]",
		"Runs the fake flaky payments API (POST /payments, GET /payments/{id},\n"+
			"GET /payments?reference=R, GET /_ledger)\n"+
			"with server-side idempotency and injected faults, until SIGINT (Ctrl-C) or SIGTERM;\n"+
			"then it prints its ledger and exits 0. It prints its URL on the first line.\n\n"+
			"Fault names: lost drop reset hold slow NNN NNNdate NNNbad (NNN a status 400-599).")
	addr := fs.String("addr", "127.0.0.1:8080", "listen `address` (host:port)")
	seed := fs.Uint64("seed", 1, "seed for the random fault plan; the same seed draws the same faults")
	faults := fs.String("faults", "none", "fault `mix`, e.g. lost=0.08,503=0.1,hold=0.03:1500ms; \"default\" is "+testserver.DefaultMix)
	ttl := fs.Duration("ttl", testserver.DefaultKeyTTL, "how long a stored result is replayed")
	requireKey := fs.Bool("require-key", false, "answer 400 to POST /payments without an Idempotency-Key")
	ignoreKeys := fs.Bool("ignore-keys", false, "be a provider that ignores idempotency keys: every POST /payments charges;\nGET /payments?reference=R still lists the payments for R, for a client to reconcile against")
	identityHeader := fs.String("identity-header", "", "scope idempotency keys by this `header`'s value (an account), not by the Authorization header")
	verbose := fs.Bool("v", false, "log every POST /payments to stderr")
	pidfile := fs.String("pidfile", "", "write this process's ID to `file` once listening, and remove it on exit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs.Name(), "unexpected arguments %q", fs.Args())
	}

	plan, err := testserver.ParsePlan(*seed, *faults)
	if err != nil {
		return usageError(fs.Name(), "-faults: %v", err)
	}
	opts := &testserver.Options{RequireKey: *requireKey, IgnoreKeys: *ignoreKeys, KeyTTL: *ttl}
	if *identityHeader != "" {
		name := *identityHeader
		opts.Identity = func(r *http.Request) (string, error) { return r.Header.Get(name), nil }
	}
	if len(plan.Rates) > 0 {
		opts.Plan = plan
	}
	if *verbose {
		opts.Logf = log.New(os.Stderr, "idem serve: ", log.LstdFlags|log.Lmicroseconds).Printf
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := testserver.Listen(*addr, opts)
	if err != nil {
		return err
	}
	if *pidfile != "" {
		remove, err := writePidfile(*pidfile)
		if err != nil {
			srv.Close()
			return fmt.Errorf("-pidfile: %w", err)
		}
		defer remove()
	}
	fmt.Println(srv.URL)
	fmt.Fprintf(os.Stderr, "idem serve: pid %d, faults %s, seed %d, key TTL %v; ledger at %s/_ledger; Ctrl-C or SIGTERM to stop\n",
		os.Getpid(), *faults, *seed, *ttl, srv.URL)

	<-ctx.Done()
	stop() // a second Ctrl-C now kills the process the usual way
	srv.Close()
	fmt.Print("\nidem serve: stopped; its ledger:\n" + srv.Ledger().Summary())
	return nil
}
