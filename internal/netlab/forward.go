//go:build linux

// forward.go holds the Forwarder: a listener on the root end of a Pair that
// pipes each connection to a target the root namespace reaches, such as
// PostgreSQL or Redis on 127.0.0.1.

package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// targetTimeout bounds the forwarder's dial to its target.
const targetTimeout = 5 * time.Second

// Forwarder accepts connections and pipes each to its target. Close stops
// it.
type Forwarder struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[*net.TCPConn]bool // true for the link's side, false for the target's
	closed bool
	wg     sync.WaitGroup
}

// ForwardRoot starts a Forwarder to target on p's root end, port 0. Its
// sockets are bound to that end, so they never send by another interface:
// while the end is down, or once it is deleted, their packets go nowhere,
// never out by the default route.
func ForwardRoot(p *Pair, target string) (*Forwarder, error) {
	if p.Outer != nil {
		return nil, errors.New("netlab: ForwardRoot needs a pair with its outer end in the root namespace")
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		cerr := c.Control(func(fd uintptr) { err = unix.BindToDevice(int(fd), p.OuterDev) })
		return errors.Join(cerr, err)
	}}
	ln, err := lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(p.OuterIP, 0).String())
	if err != nil {
		return nil, fmt.Errorf("netlab: forwarder: %w", err)
	}
	f := &Forwarder{ln: ln, target: target, conns: make(map[*net.TCPConn]bool)}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// Addr is the forwarder's address, an IPv4 host:port.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

func (f *Forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		f.wg.Add(1)
		go f.pipe(c.(*net.TCPConn))
	}
}

// pipe copies between c and a new connection to the target, each way until
// EOF, which it passes on as a half close.
func (f *Forwarder) pipe(c *net.TCPConn) {
	defer f.wg.Done()
	defer c.Close()
	t, err := net.DialTimeout("tcp", f.target, targetTimeout)
	if err != nil {
		return
	}
	tc := t.(*net.TCPConn)
	defer tc.Close()
	if !f.track(c, tc) {
		c.SetLinger(0) // the forwarder is closing: see close
		return
	}
	defer f.untrack(c, tc)
	var wg sync.WaitGroup
	wg.Go(func() { pump(tc, c) })
	pump(c, tc)
	wg.Wait()
}

// pump copies src to dst. On EOF it half-closes dst; on an error (a reset,
// a closed connection) nothing more will flow either way, so it closes
// both, which also ends the other direction's pump.
func pump(dst, src *net.TCPConn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	dst.CloseWrite()
}

func (f *Forwarder) track(link, target *net.TCPConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[link], f.conns[target] = true, false
	return true
}

func (f *Forwarder) untrack(link, target *net.TCPConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, link)
	delete(f.conns, target)
}

// Close stops the forwarder and waits for its goroutines. The link's side
// of each connection is reset rather than closed, so that no socket lingers
// to retransmit its FIN over a link that is about to go. Every link side is
// made to reset before any connection is closed: closing a target side ends
// its pipe, which closes the link side too.
func (f *Forwarder) Close() {
	f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c, link := range f.conns {
		if link {
			c.SetLinger(0)
		}
	}
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
