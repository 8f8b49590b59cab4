// manualclock.go is ManualClock, the Clock tests move by hand, for this package's tests
// and the middleware's.

package lease

import (
	"sync"
	"time"
)

// ManualClock is a Clock that moves only when Advance moves it. A timer's call runs, in its
// own goroutine as time.AfterFunc's does, when Advance passes it (at once for a timer set
// to fire now or in the past). It is safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*manualTimer
	sets    int            // AfterFunc and Reset calls so far
	changed chan struct{}  // closed, and replaced, on each of them
	calls   sync.WaitGroup // the timer calls running
}

// NewManualClock returns a ManualClock reading now.
func NewManualClock(now time.Time) *ManualClock {
	return &ManualClock{now: now, changed: make(chan struct{})}
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

// AfterFunc schedules f for d from now (Clock).
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
	c.mu.Unlock()
	for _, f := range due {
		c.calls.Go(f)
	}
	return len(due)
}

// Wait waits until the timer calls started so far have returned, and those they started
// in turn (a timer set to fire at once). A test calls it after Advance to see what the
// calls did; not while one of them waits on the test.
func (c *ManualClock) Wait() { c.calls.Wait() }

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	was := t.active
	t.at, t.active = t.c.now.Add(d), d > 0
	t.c.sets++
	close(t.c.changed)
	t.c.changed = make(chan struct{})
	t.c.mu.Unlock()
	if d <= 0 {
		t.c.calls.Go(t.f)
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
