// This file holds the loopback server, which runs in a child process started
// by child.go. It does as little as an HTTP/1.1 server can: read the whole
// body, answer a small JSON body.

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Paths the server answers. Every other path behaves like pathPayments.
const (
	pathPayments = "/payments" // POST: 201 {"id":"pay_1"}; GET: 200, same body
	pathHeld     = "/held"     // as /payments, but 503 while held (the resume figure)
	pathHold     = "/_hold"    // POST: /held answers 503 from now on
	pathRelease  = "/_release" // POST: /held answers like /payments from now on
)

var created = []byte(`{"id":"pay_1"}`)

// server is the child's handler. It is safe for concurrent use.
type server struct {
	held  atomic.Bool
	delay time.Duration // think time of /payments, and of /held once released
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	switch r.URL.Path {
	case pathHold:
		s.held.Store(true)
		w.WriteHeader(http.StatusNoContent)
		return
	case pathRelease:
		s.held.Store(false)
		w.WriteHeader(http.StatusNoContent)
		return
	case pathHeld:
		if s.held.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		time.Sleep(s.delay)
	case pathPayments:
		time.Sleep(s.delay)
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
	}
	w.Write(created)
}

// serveChild listens on a loopback port, prints its address on stdout, and
// serves until its stdin closes: the parent closes it to stop the child, and
// the kernel closes it if the parent dies.
func serveChild() int {
	var delay time.Duration
	if len(os.Args) > 2 {
		var err error
		if delay, err = time.ParseDuration(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "bench server:", err)
			return 1
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench server:", err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	srv := &http.Server{Handler: &server{delay: delay}, ReadHeaderTimeout: 10 * time.Second}
	err = srv.Serve(ln)
	fmt.Fprintln(os.Stderr, "bench server:", err)
	return 1
}
