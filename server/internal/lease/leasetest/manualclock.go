// Package leasetest has ManualClock, the lease.Clock tests move by hand: the lease
// package's own tests, the middleware's and the consumers'.
package leasetest

import (
	"sync"
	"time"
)

// Timer is lease.Timer, spelled out: this package does not import lease, so that lease's
// own tests can import it.
type Timer = interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// ManualClock is a Clock that moves only when Advance moves it. A timer's call runs, in its
// own goroutine as time.AfterFunc's does, when Advance passes it (at once for a timer set
// to fire now or in the past). It is safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*manualTimer
	sets    int           // AfterFunc and Reset calls so far
	changed chan struct{} // closed, and replaced, on each of them
	running int           // timer calls started and not returned
	idle    *sync.Cond    // signalled, with mu, when running drops to 0
}

// NewManualClock returns a ManualClock reading now.
func NewManualClock(now time.Time) *ManualClock {
	c := &ManualClock{now: now, changed: make(chan struct{})}
	c.idle = sync.NewCond(&c.mu)
	return c
}

type manualTimer struct {
	c      *ManualClock
	at     time.Time
	f      func()
	active bool
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f for d from now (lease.Clock).
func (c *ManualClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &manualTimer{c: c, f: f}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	t.Reset(d)
	return t
}

// Sets returns how many times a timer has been set so far (AfterFunc and Reset calls),
// and a channel closed at the next one: a test waits on it for the code under test to
// set its timer before it advances the clock past it.
func (c *ManualClock) Sets() (int, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sets, c.changed
}

// Advance moves the clock forward by d and starts the calls of the timers it passes, each
// in its own goroutine. It returns how many it started.
func (c *ManualClock) Advance(d time.Duration) int {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if t.active && !t.at.After(c.now) {
			t.active = false
			due = append(due, t.f)
		}
	}
	for _, f := range due {
		c.start(f)
	}
	c.mu.Unlock()
	return len(due)
}

// start runs f, a timer's call, in its own goroutine. Called with mu held.
func (c *ManualClock) start(f func()) {
	c.running++
	go func() {
		defer func() {
			c.mu.Lock()
			if c.running--; c.running == 0 {
				c.idle.Broadcast()
			}
			c.mu.Unlock()
		}()
		f()
	}()
}

// Wait waits until no timer call is running: those Advance started, and those they started
// in turn (a timer set to fire at once). A test calls it after Advance to see what the
// calls did; not while one of them waits on the test.
func (c *ManualClock) Wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.running > 0 {
		c.idle.Wait()
	}
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.at, t.active = t.c.now.Add(d), d > 0
	t.c.sets++
	close(t.c.changed)
	t.c.changed = make(chan struct{})
	if d <= 0 {
		t.c.start(t.f)
	}
	return was
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}
