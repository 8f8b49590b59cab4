// Helpers that let a test act at an event instead of after a real delay: a
// clock that says when a wait begins, a context whose deadline passes when
// the test says so, and a bounded receive. A loaded machine can stretch any
// real delay; it cannot reorder these events.

package idem

import (
	"context"
	"sync"
	"testing"
	"time"
)

// signalClock is a clock whose Sleep sends its duration on sleeping when a
// wait begins, then waits as its base does. A test cancels a call on that
// signal, so the cancel lands in the wait however long the attempts before
// it took.
type signalClock struct {
	clock
	sleeping chan time.Duration
}

func newSignalClock(base clock) *signalClock {
	return &signalClock{clock: base, sleeping: make(chan time.Duration, 64)}
}

func (c *signalClock) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case c.sleeping <- d:
	default: // never hold up the call under test
	}
	return c.clock.Sleep(ctx, d)
}

// manualDeadline is a context with a deadline that passes when the test calls
// pass, not when a real timer fires: Deadline reports at, and once passed,
// Done is closed and Err is context.DeadlineExceeded, as if the clock had
// reached at. It carries no values.
type manualDeadline struct {
	context.Context
	at   time.Time
	done chan struct{}
	pass func()
}

func newManualDeadline(tb testing.TB, at time.Time) *manualDeadline {
	done := make(chan struct{})
	c := &manualDeadline{Context: context.Background(), at: at, done: done,
		pass: sync.OnceFunc(func() { close(done) })}
	tb.Cleanup(c.pass) // contexts derived from it stop watching it
	return c
}

func (c *manualDeadline) Deadline() (time.Time, bool) { return c.at, true }
func (c *manualDeadline) Done() <-chan struct{}       { return c.done }

func (c *manualDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// await waits for ch to deliver or be closed, and fails the test if that
// takes more than 10 s: the bound is for a broken test, not a slow machine.
func await[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatalf("not within 10 s: %s", what)
		panic("unreachable")
	}
}
