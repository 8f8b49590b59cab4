// This file holds the floors' group committer (floor.go, pgfloor.go): one
// goroutine commits everything queued at that moment, as soon as a
// write-ahead waits, with no fixed delay. A settle rides the next commit, or
// is flushed flushDelay after the first one queued with no write-ahead to
// ride. The floor says how to commit; the committer says when.

package main

import (
	"sync"
	"time"
)

// groupCommitter queues write-aheads P, each waiting for the commit that
// carries it, and settles S, which wait for no one. It is safe for
// concurrent use.
type groupCommitter[P, S any] struct {
	flushDelay time.Duration    // a first settle waits at most this long for a write-ahead to ride
	laterDelay time.Duration    // armLater asks for a commit this long after it
	commit     func(force bool) // takes the queue (take) and commits it; force on close

	mu      sync.Mutex
	puts    []queuedPut[P]
	settles []S

	wake, armed, laterArmed chan struct{} // one token each: a put waits; a first settle; a first armLater
	stop, done              chan struct{}
	closeOnce               sync.Once
}

// queuedPut is a queued write-ahead; its commit's error goes to done.
type queuedPut[P any] struct {
	p    P
	done chan error
}

// newGroupCommitter starts the committer goroutine; Close stops it.
func newGroupCommitter[P, S any](flushDelay, laterDelay time.Duration, commit func(force bool)) *groupCommitter[P, S] {
	g := &groupCommitter[P, S]{flushDelay: flushDelay, laterDelay: laterDelay, commit: commit,
		wake: make(chan struct{}, 1), armed: make(chan struct{}, 1), laterArmed: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go g.loop()
	return g
}

// put queues a write-ahead and waits for the commit that carries it.
func (g *groupCommitter[P, S]) put(p P) error {
	done := make(chan error, 1)
	g.mu.Lock()
	g.puts = append(g.puts, queuedPut[P]{p: p, done: done})
	g.mu.Unlock()
	poke(g.wake)
	return <-done
}

// settle queues s for the next commit.
func (g *groupCommitter[P, S]) settle(s S) {
	g.mu.Lock()
	g.settles = append(g.settles, s)
	first := len(g.settles) == 1
	g.mu.Unlock()
	if first {
		poke(g.armed)
	}
}

// armLater asks for a commit laterDelay from now, unless one is asked for
// already: for work the floor owes later (the contract floor's history).
func (g *groupCommitter[P, S]) armLater() { poke(g.laterArmed) }

// take returns up to max queued write-aheads (all of them if max is 0), every
// queued settle, and whether write-aheads are left; the committer's commit
// calls it. Each put's done must then get the commit's error (release).
func (g *groupCommitter[P, S]) take(max int) (puts []queuedPut[P], settles []S, more bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.puts)
	if max > 0 {
		n = min(n, max)
	}
	puts, settles = g.puts[:n:n], g.settles
	g.puts, g.settles = g.puts[n:], nil
	if len(g.puts) == 0 {
		g.puts = nil
	}
	return puts, settles, len(g.puts) > 0
}

// release tells each of puts' writers the outcome of their commit.
func release[P any](puts []queuedPut[P], err error) {
	for _, p := range puts {
		p.done <- err
	}
}

// loop commits as soon as a put waits, flushDelay after a first settle,
// laterDelay after armLater, and a last time (forced) on Close.
func (g *groupCommitter[P, S]) loop() {
	defer close(g.done)
	flush, later := time.NewTimer(time.Hour), time.NewTimer(time.Hour)
	flush.Stop()
	later.Stop()
	for {
		select {
		case <-g.wake:
			g.commit(false)
		case <-g.armed:
			flush.Reset(g.flushDelay)
		case <-flush.C:
			g.commit(false)
		case <-g.laterArmed:
			later.Reset(g.laterDelay)
		case <-later.C:
			g.commit(false)
		case <-g.stop:
			g.commit(true)
			return
		}
	}
}

// Close commits what is queued and stops the committer; later calls do
// nothing.
func (g *groupCommitter[P, S]) Close() {
	g.closeOnce.Do(func() {
		close(g.stop)
		<-g.done
	})
}

// poke puts the token in ch unless it is there.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
