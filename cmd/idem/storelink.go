// This file holds the fault proxy on the link between one fake server and its idempotency
// store (serverstore.go): a TCP proxy in the spirit of rrproxy.go whose mode the nemesis
// (nemesis.go) switches at run time, so that the server's own Redis or PostgreSQL client
// meets what a real network does to it: replies lost after the store acted, replies held
// back past the client's timeouts, a partition longer than the lease.

package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// linkMode is what a storeLink does to the bytes it relays.
type linkMode int32

const (
	// linkPass relays both ways.
	linkPass linkMode = iota
	// linkReset relays the client's requests to the store, then, when the store's reply
	// comes back, resets the client's connection (SO_LINGER 0) instead of relaying it: the
	// store acted, the client gets an error and cannot tell whether it did. A connection
	// made meanwhile is reset at its handshake's first reply. A reset connection is gone
	// for good.
	linkReset
	// linkHold relays the client's requests to the store and holds its replies back: a
	// call times out on the client's read timeout or deadline, if it has one, and waits
	// for the heal if not.
	linkHold
	// linkPartition relays nothing either way and resets nothing, as a silent cut: a
	// connection made meanwhile is accepted (by the proxy) but carries nothing.
	linkPartition
	// linkSlow relays both ways, each read slowBy late: a slow network, which this
	// kernel (no netem) cannot make.
	linkSlow
)

// slowBy is how late linkSlow relays each read.
const slowBy = 300 * time.Millisecond

// String names m for the report.
func (m linkMode) String() string {
	switch m {
	case linkPass:
		return "pass"
	case linkReset:
		return "reset after write"
	case linkHold:
		return "replies held"
	case linkPartition:
		return "partition"
	case linkSlow:
		return fmt.Sprintf("slow link (+%v a read)", slowBy)
	}
	return "linkMode(?)"
}

// storeLink forwards every connection made to it to the store, in the mode set with
// setMode. Healing (linkPass again) relays what was held, in order, to whichever side is
// still connected, as TCP delivers it once a route comes back: a late reply, or a late
// request that the store acts on only now. The proxy closes no held connection itself: a
// client that gave up on a call closes its own, and the store's end is closed once what
// that client had sent is delivered. It is safe for concurrent use.
type storeLink struct {
	ln    net.Listener
	store string // host:port
	stats linkCounters

	mu      sync.Mutex
	mode    linkMode
	changed chan struct{}          // closed and replaced by setMode
	conns   map[*linkConn]struct{} // nil once closed
	wg      sync.WaitGroup
}

// linkConn is one client connection and its connection to the store.
type linkConn struct {
	client, store net.Conn
	once          sync.Once
	done          chan struct{} // closed when both are closed
	asked         atomic.Int64  // when the proxy read the oldest request not answered yet, Unix ns; 0 for none
}

// linkCounters count what a link did, since it started, but for slowest, since
// takeSlowest last took it.
type linkCounters struct {
	conns, resets, heldReplies, heldRequests, lostReplies, unanswered atomic.Int64
	slowest                                                           atomic.Int64 // ns
}

// linkStats is a snapshot of a link's counters. A reply or request counted is one read
// from its socket: one message, or a few that arrived together.
type linkStats struct {
	Conns        int64 // connections accepted
	Resets       int64 // client connections reset after the store replied
	HeldReplies  int64 // replies that waited for a heal
	HeldRequests int64 // requests that waited for a heal (the store saw them late)
	LostReplies  int64 // held replies never delivered: their client had closed
	Unanswered   int64 // connections that ended with a request the proxy relayed no reply to
}

// sub returns s minus before: what happened between the two snapshots.
func (s linkStats) sub(before linkStats) linkStats {
	return linkStats{s.Conns - before.Conns, s.Resets - before.Resets, s.HeldReplies - before.HeldReplies,
		s.HeldRequests - before.HeldRequests, s.LostReplies - before.LostReplies, s.Unanswered - before.Unanswered}
}

// newStoreLink listens on a free loopback port and forwards to store, relaying both ways
// until setMode says otherwise.
func newStoreLink(store string) (*storeLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return storeLinkOn(ln, store), nil
}

// storeLinkOn is newStoreLink on a listener of the caller's, such as one made in a
// network namespace (chaos -netns); its connections to store are made from this process's
// own namespace.
func storeLinkOn(ln net.Listener, store string) *storeLink {
	l := &storeLink{ln: ln, store: store, changed: make(chan struct{}), conns: map[*linkConn]struct{}{}}
	l.wg.Go(l.serve)
	return l
}

// Addr is where the store's clients connect instead of the store.
func (l *storeLink) Addr() string { return l.ln.Addr().String() }

// setMode switches the link's mode; linkPass heals it.
func (l *storeLink) setMode(m linkMode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mode = m
	close(l.changed)
	l.changed = make(chan struct{})
}

// state returns the mode and the channel closed when it next changes.
func (l *storeLink) state() (linkMode, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mode, l.changed
}

// takeSlowest returns the longest a client waited for a reply through the link since the
// last call: from the proxy's read of its request to its relay of the reply (a call
// whose reply never came is not counted). One request and one reply at a time is the
// shape of a store call; with several in flight on a connection (pipelining), the wait
// counts from the oldest.
func (l *storeLink) takeSlowest() time.Duration { return time.Duration(l.stats.slowest.Swap(0)) }

// answered notes that a reply reached lc's client now.
func (l *storeLink) answered(lc *linkConn) {
	asked := lc.asked.Swap(0)
	if asked == 0 {
		return
	}
	wait := time.Now().UnixNano() - asked
	for {
		old := l.stats.slowest.Load()
		if wait <= old || l.stats.slowest.CompareAndSwap(old, wait) {
			return
		}
	}
}

// Stats returns the link's counters now.
func (l *storeLink) Stats() linkStats {
	c := &l.stats
	return linkStats{c.conns.Load(), c.resets.Load(), c.heldReplies.Load(), c.heldRequests.Load(), c.lostReplies.Load(), c.unanswered.Load()}
}

func (l *storeLink) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		l.stats.conns.Add(1)
		l.wg.Go(func() { l.forward(c) })
	}
}

// forward relays c to and from a new connection to the store until either side closes
// or the link resets them.
func (l *storeLink) forward(c net.Conn) {
	s, err := net.DialTimeout("tcp", l.store, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	lc := &linkConn{client: c, store: s, done: make(chan struct{})}
	if !l.track(lc) {
		return
	}
	defer l.untrack(lc)
	var wg sync.WaitGroup
	wg.Go(func() { l.pipe(lc, true) })
	wg.Go(func() { l.pipe(lc, false) })
	wg.Wait()
	if lc.asked.Load() != 0 {
		l.stats.unanswered.Add(1)
	}
}

// pipe copies one direction of lc: the client's requests to the store (toStore), or the
// store's replies to the client. A read is relayed when the mode lets it through; so is
// the end of the stream, which closes both connections, as rrproxy does.
func (l *storeLink) pipe(lc *linkConn, toStore bool) {
	src := lc.store
	if toStore {
		src = lc.client
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && toStore {
			lc.asked.CompareAndSwap(0, time.Now().UnixNano())
		}
		if n > 0 && !l.relay(lc, toStore, buf[:n]) {
			return
		}
		if n > 0 && !toStore {
			l.answered(lc)
		}
		if err != nil {
			if l.wait(lc, toStore, false) {
				lc.close(false)
			}
			return
		}
	}
}

// relay writes p to the other side of lc once the mode lets it through, and reports
// whether the pipe goes on.
func (l *storeLink) relay(lc *linkConn, toStore bool, p []byte) bool {
	if !l.wait(lc, toStore, true) {
		return false
	}
	dst := lc.client
	if toStore {
		dst = lc.store
	}
	if _, err := dst.Write(p); err != nil {
		lc.close(false)
		return false
	}
	return true
}

// wait waits until the mode lets a read of one direction through, and reports whether
// it may go on; data says the read carried bytes, not the end of the stream. In
// linkReset, a reply resets the client instead. A read held, then dropped because lc
// closed meanwhile, is counted.
func (l *storeLink) wait(lc *linkConn, toStore, data bool) bool {
	held := false
	for {
		mode, changed := l.state()
		switch {
		case mode == linkSlow && data:
			select {
			case <-time.After(slowBy):
				return true
			case <-lc.done:
				return false
			}
		case mode == linkReset && !toStore && data:
			l.stats.resets.Add(1)
			lc.close(true)
			return false
		case mode == linkPartition, mode == linkHold && !toStore:
			if !held && data {
				held = true
				if toStore {
					l.stats.heldRequests.Add(1)
				} else {
					l.stats.heldReplies.Add(1)
				}
			}
			select {
			case <-changed:
				continue
			case <-lc.done:
				if held && !toStore {
					l.stats.lostReplies.Add(1)
				}
				return false
			}
		}
		return true
	}
}

// close closes both connections, the client's with a reset (SO_LINGER 0) if rst.
func (lc *linkConn) close(rst bool) {
	lc.once.Do(func() {
		if tc, ok := lc.client.(*net.TCPConn); ok && rst {
			tc.SetLinger(0)
		}
		lc.client.Close()
		lc.store.Close()
		close(lc.done)
	})
}

// track registers lc, so Close can end it; false if closing.
func (l *storeLink) track(lc *linkConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		lc.close(false)
		return false
	}
	l.conns[lc] = struct{}{}
	return true
}

func (l *storeLink) untrack(lc *linkConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, lc)
}

// Close stops accepting, closes every connection, held ones included, and waits for the
// copies.
func (l *storeLink) Close() error {
	err := l.ln.Close()
	l.mu.Lock()
	for lc := range l.conns {
		lc.close(false)
	}
	l.conns = nil
	l.mu.Unlock()
	l.wg.Wait()
	return err
}
