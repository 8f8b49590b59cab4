// Package echotest is a TCP echo server for the tests of the network-fault packages
// (internal/netlab, internal/netfault): it echoes every connection's bytes back and
// reports each chunk that reaches it, so a test can tell what crossed a cut and what did
// not.
package echotest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Patience bounds the waits for what must come.
const Patience = 3 * time.Second

// Server echoes what it receives. Addr is where it listens.
type Server struct {
	Addr string
	got  chan string
}

// Serve echoes every connection accepted on ln until the test ends, when it closes ln and
// every connection and waits for its goroutines.
func Serve(tb testing.TB, ln net.Listener) *Server {
	tb.Helper()
	s := &Server{Addr: ln.Addr().String(), got: make(chan string, 64)}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { s.echo(c) })
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

func (s *Server) echo(c net.Conn) {
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			s.got <- string(buf[:n])
			c.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// Received waits, up to Patience, for the server to receive want.
func (s *Server) Received(tb testing.TB, want string) {
	tb.Helper()
	select {
	case got := <-s.got:
		if got != want {
			tb.Fatalf("the server received %q, want %q", got, want)
		}
	case <-time.After(Patience):
		tb.Fatalf("the server did not receive %q within %v", want, Patience)
	}
}

// ReceivedNothing checks that nothing has reached the server; call it after the client
// has waited out its silence.
func (s *Server) ReceivedNothing(tb testing.TB) {
	tb.Helper()
	select {
	case got := <-s.got:
		tb.Fatalf("the server received %q through the cut", got)
	default:
	}
}
