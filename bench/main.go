// Command bench measures what idem costs a client: throughput, latency and
// allocations of journaled and unjournaled calls against plain net/http and
// go-retryablehttp, the fsync floor under them, and how long a restart with a
// large backlog of pending operations takes to open and resume; then what
// the server middleware costs a service, against floor middlewares
// (package serverbench; -server=false skips it, -server-only runs it alone).
// config.go holds the flags, run.go the order of the phases, report.go the
// output.
//
// Run it from this directory (it is a module of its own):
//
//	cd bench && go run .            # about 2-3 minutes
//	cd bench && go run . -quick     # a smoke run, about 15 s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/idem-go/idem/bench/serverbench"
)

func main() {
	// The loopback server runs as this same binary in a child process
	// (child.go), so the parent's allocation counters see client work only.
	if isServeChild() {
		os.Exit(serveChild())
	}
	if serverbench.IsChild() {
		os.Exit(serverbench.ServeChild())
	}
	cfg, err := parseFlags(os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}
