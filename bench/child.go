// This file starts and stops the child process that runs the loopback server
// (serve.go). The child is this binary re-executed with the hidden first
// argument -serve (harness.StartChild), so the parent measures client work
// only.

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
)

const serveArg = "-serve"

// isServeChild reports whether this process is the server child. It is checked
// before flag parsing, in main and in the test binary's TestMain.
func isServeChild() bool { return len(os.Args) > 1 && os.Args[1] == serveArg }

// child is a running server process.
type child struct {
	*harness.Child
	addr string // 127.0.0.1:port
}

// startChild starts the server, which sleeps delay before answering each
// /payments request.
func startChild(delay time.Duration) (*child, error) {
	hc, line, err := harness.StartChild(context.Background(), 10*time.Second, serveArg, delay.String())
	if err != nil {
		return nil, fmt.Errorf("server child: %w", err)
	}
	c := &child{Child: hc, addr: string(line)}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil || host != "127.0.0.1" {
		c.stop()
		return nil, fmt.Errorf("server child printed %q, want 127.0.0.1:port", c.addr)
	}
	return c, nil
}

func (c *child) url(path string) string { return "http://" + c.addr + path }

func (c *child) pid() int { return c.PID() }

// stop ends the child at once: its stdin closed, then killed. It owes no
// clean-up (its journals are the parent's).
func (c *child) stop() { c.Stop(0) }
