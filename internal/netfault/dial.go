//go:build linux

// dial.go is the socket side of a Link: the forwarder on the root end of the
// veth pair, and the dial from inside the namespace. netfault.go makes the
// link and cuts it.

package netfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// targetTimeout bounds the forwarder's dial to its target.
const targetTimeout = 5 * time.Second

// DialContext connects to addr (normally Addr()) from inside the link's
// namespace, so the connection crosses the link for its whole life; it
// honours ctx's deadline and cancellation. It has the signature of
// go-redis's Options.Dialer and pgconn's Config.DialFunc. addr should be an
// IP address: a host name is looked up from the root namespace.
func (l *Link) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c, err := l.dialInside(ctx, network, addr)
		done <- result{c, err}
	}()
	r := <-done
	return r.conn, r.err
}

// dialInside moves its goroutine's thread into the namespace and dials
// there; a socket stays in the namespace it was made in. The thread is
// locked and never unlocked: when the goroutine returns, the runtime ends
// the thread instead of running other goroutines in the namespace.
func (l *Link) dialInside(ctx context.Context, network, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	path := filepath.Join(nsDir, l.ns)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netfault: open %s: %w", path, err)
	}
	err = unix.Setns(fd, unix.CLONE_NEWNET)
	unix.Close(fd)
	if err != nil {
		return nil, fmt.Errorf("netfault: setns %s: %w", path, err)
	}
	// A negative FallbackDelay keeps every connect on this goroutine:
	// the fast fallback between address families would dial on others.
	d := net.Dialer{FallbackDelay: -1}
	return d.DialContext(ctx, network, addr)
}

// forwarder accepts connections on the root end of a link and pipes each to
// its target.
type forwarder struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[*net.TCPConn]bool // true for the link's side, false for the target's
	closed bool
	wg     sync.WaitGroup
}

// listen starts a forwarder on ip, port 0. Its sockets are bound to dev, the
// root end, so they never send by another interface: while the end is down,
// or once it is deleted, their packets go nowhere, never out by the default
// route.
func listen(ip netip.Addr, dev, target string) (*forwarder, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		cerr := c.Control(func(fd uintptr) { err = unix.BindToDevice(int(fd), dev) })
		return errors.Join(cerr, err)
	}}
	ln, err := lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	f := &forwarder{ln: ln, target: target, conns: make(map[*net.TCPConn]bool)}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
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
func (f *forwarder) pipe(c *net.TCPConn) {
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

func (f *forwarder) track(link, target *net.TCPConn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[link], f.conns[target] = true, false
	return true
}

func (f *forwarder) untrack(link, target *net.TCPConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, link)
	delete(f.conns, target)
}

// close stops the forwarder and waits for its goroutines. The link's side
// of each connection is reset rather than closed, so that no socket lingers
// to retransmit its FIN over a link that is about to go. Every link side is
// made to reset before any connection is closed: closing a target side ends
// its pipe, which closes the link side too.
func (f *forwarder) close() {
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
