// Test helpers shared by the package's tests: a fake clock, a journal in a
// temporary directory, and a body that counts its Close calls.

package idem

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock advances only when the code under test sleeps. It records every
// wait so tests can check them without sleeping for real.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	// onSleep, if set, runs before the fake time advances; a test can cancel a
	// context there to model a caller that gives up mid-wait.
	onSleep func(d time.Duration)
	timers  []*fakeTimer
}

// fakeTimer is a pending After: it fires when the fake time reaches at.
type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.onSleep != nil {
		c.onSleep(d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.fire()
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fire()
}

// After returns a channel that receives once the fake time has advanced by d.
func (c *fakeClock) After(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.fire()
	return t.c, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.timers = slices.DeleteFunc(c.timers, func(x *fakeTimer) bool { return x == t })
	}
}

// Timers reports how many Afters are waiting.
func (c *fakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextTimer returns when the earliest waiting After fires, or the zero time.
func (c *fakeClock) NextTimer() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, t := range c.timers {
		if next.IsZero() || t.at.Before(next) {
			next = t.at
		}
	}
	return next
}

// fire sends on every timer that is due. c.mu is held.
func (c *fakeClock) fire() {
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.at.After(c.now) {
			return false
		}
		t.c <- c.now
		return true
	})
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// testJournal opens a journal in a fresh temporary directory, closed at the
// end of the test.
func testJournal(tb testing.TB) (*Journal, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "idem.journal")
	j, err := OpenJournal(path, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { j.Close() })
	return j, path
}

// testTransport builds a Transport over a fresh journal with a fake clock.
func testTransport(tb testing.TB, opts *Options) (*Transport, *fakeClock) {
	tb.Helper()
	j, _ := testJournal(tb)
	tr, err := NewTransport(j, opts)
	require.NoError(tb, err)
	clk := newFakeClock()
	tr.clock = clk
	return tr, clk
}

// countingBody is a request body that counts its Close calls.
type countingBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *countingBody) Close() error {
	b.closes.Add(1)
	return nil
}

// bolt is the Transport's journal as the bbolt Journal it is in these tests.
func (t *Transport) bolt() *Journal { return t.journal.(*Journal) }
