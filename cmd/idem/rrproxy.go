// This file holds the round-robin TCP proxy that puts several fake servers behind one
// address (cluster.go): each accepted connection goes to the next server in turn, and
// bytes are copied both ways until either side closes, so a server's faults (a dropped
// connection, a reset) reach the client as they happened.

package main

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// rrProxy forwards connections to its backends in turn. It is safe for concurrent use.
type rrProxy struct {
	ln       net.Listener
	backends []string // host:port
	next     atomic.Uint64
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newRRProxy listens on addr ("127.0.0.1:0" for a free loopback port) and forwards to
// backends.
func newRRProxy(addr string, backends []string) (*rrProxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return rrProxyOn(ln, backends, d.DialContext), nil
}

// rrProxyOn is newRRProxy on a listener of the caller's, reaching the backends with dial:
// both made in a network namespace, with chaos -netns.
func rrProxyOn(ln net.Listener, backends []string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *rrProxy {
	p := &rrProxy{ln: ln, backends: backends, dial: dial, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p
}

// Addr is where clients connect.
func (p *rrProxy) Addr() string { return p.ln.Addr().String() }

func (p *rrProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		backend := p.backends[(p.next.Add(1)-1)%uint64(len(p.backends))]
		p.wg.Go(func() { p.forward(c, backend) })
	}
}

// forward copies c to and from a new connection to backend; when either direction ends,
// both connections close, as a client or server would see a dropped connection.
func (p *rrProxy) forward(c net.Conn, backend string) {
	b, err := p.dial(context.Background(), "tcp", backend)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, b) {
		return
	}
	defer p.untrack(c, b)
	done := make(chan struct{}, 2)
	go func() { io.Copy(b, c); done <- struct{}{} }()
	go func() {
		if _, err := io.Copy(c, b); err != nil {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // the server reset the connection: so does the proxy
			}
		}
		done <- struct{}{}
	}()
	<-done
	c.Close()
	b.Close()
	<-done
}

// track registers live connections, so Close can end them; false if closing.
func (p *rrProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *rrProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// Close stops accepting, closes every forwarded connection, and waits for the copies.
func (p *rrProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
