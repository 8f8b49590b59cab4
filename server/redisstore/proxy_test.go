// proxy_test.go is a loopback TCP proxy to the real Redis that a test can cut and restore
// on the same address: Redis going away and coming back for its clients, without
// stopping the Redis that other people use.

package redisstore_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy forwards connections from its address to upstream while up. It is safe for
// concurrent use.
type proxy struct {
	t        *testing.T
	upstream string
	addr     string

	mu    sync.Mutex
	l     net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// newProxy starts a proxy to upstream on a loopback port; t's cleanup stops it.
func newProxy(t *testing.T, upstream string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, upstream: upstream, addr: l.Addr().String(), conns: map[net.Conn]bool{}}
	p.serve(l)
	t.Cleanup(p.down)
	return p
}

// down closes the listener and every connection: clients see resets and refusals.
func (p *proxy) down() {
	p.mu.Lock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	p.wg.Wait()
}

// up listens again on the same address.
func (p *proxy) up() {
	var l net.Listener
	var err error
	for range 50 { // the port may linger a moment after its close
		if l, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy: listening again on %s: %v", p.addr, err)
	}
	p.serve(l)
}

func (p *proxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				c.Close()
				continue
			}
			if !p.track(c, up) {
				return
			}
			for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
				p.wg.Go(func() {
					io.Copy(pair[0], pair[1])
					pair[0].Close()
					pair[1].Close()
				})
			}
		}
	})
}

// track records c and up for down to close, unless the proxy went down meanwhile.
func (p *proxy) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l == nil {
		c.Close()
		up.Close()
		return false
	}
	p.conns[c], p.conns[up] = true, true
	return true
}
