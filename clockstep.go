// This file holds stepClock, the clock a Transport reads: the wall clock,
// never earlier than a time idem has already read or found in the journal.
// An NTP step or a VM restore can set the wall clock back; the journal's
// times (Created, LastAttempt, NextAttempt) are then dated in the future,
// and every decision that compares them with now (due.go, expiry.go) would
// hold operations back, or let them look younger, by the size of the step.

package idem

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/journal"
)

// stepClock wraps a clock so that Now never goes back. A reading earlier
// than the latest one (or than a journal time shown to observe) raises a
// skew that is added to every later reading: idem's time then runs at the
// wall clock's rate from where it was, as if the step had not happened. A
// step forward cannot be told from time passing, and is taken as it is.
// It is safe for concurrent use.
type stepClock struct {
	base clock
	last atomic.Int64 // latest time returned or observed, in Unix nanoseconds
	skew atomic.Int64 // added to base's readings, >= 0
}

func newStepClock(base clock) *stepClock { return &stepClock{base: base} }

// journalClock returns the clock of a Transport over j (nil: none): base,
// or j's time if j keeps one (journal.Clock), never earlier than the newest time j holds (Store.LatestWritten). Until a
// record is read, that time is all the clock knows of the journal: without
// it, after a step back, a first write-ahead would be dated before records
// already there and look older than it is once Resume read them.
func journalClock(base clock, j journal.Store) *stepClock {
	if sc, ok := j.(journal.Clock); ok {
		base = storeClock{clock: base, store: sc}
	}
	c := newStepClock(base)
	if j != nil {
		if t := j.LatestWritten(); !t.IsZero() {
			c.observe(t)
		}
	}
	return c
}

func (c *stepClock) Now() time.Time {
	raw := c.base.Now()
	fresh := false
	for {
		skew, last := c.skew.Load(), c.last.Load()
		now := raw.Add(time.Duration(skew))
		n := now.UnixNano()
		switch {
		case n < last-int64(stepTolerance) && !fresh:
			// This goroutine may have stalled (GC, CPU throttling, a
			// stopped process) between reading the clock and here, while
			// others read it on time: read it again before taking the
			// reading for a step, which would move idem's time ahead of
			// the wall clock for good.
			raw, fresh = c.base.Now(), true
		case n < last-int64(stepTolerance):
			// Earlier than a time already seen, read again: the clock
			// went back.
			c.skew.CompareAndSwap(skew, skew+(last-n))
		case n <= last || c.last.CompareAndSwap(last, n):
			// A reading a little behind the latest is two goroutines
			// racing, not a step: taking it as one would make the skew
			// creep ahead.
			return now
		}
	}
}

// stepTolerance is the smallest step back that stepClock corrects. Readings
// taken at once by several goroutines come back in any order; a step below
// this moves no decision by much.
const stepTolerance = time.Second

// observe tells the clock that t is a time already past: a time written in
// the journal, by this process or an earlier one.
func (c *stepClock) observe(t time.Time) {
	n := t.UnixNano()
	for {
		last := c.last.Load()
		if n <= last || c.last.CompareAndSwap(last, n) {
			return
		}
	}
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error { return c.base.Sleep(ctx, d) }

func (c *stepClock) After(d time.Duration) (<-chan time.Time, func()) { return c.base.After(d) }

// now returns the Transport's time for a decision about rec: the clock's,
// once it has observed rec's times, so that rec is never dated in the
// future. A clock a test put in place of the stepClock is read as it is.
func (t *Transport) now(rec *Record) time.Time {
	if c, ok := t.clock.(*stepClock); ok && rec != nil {
		c.observe(rec.Written())
	}
	return t.clock.Now()
}

// storeClock reads the time from a Store that keeps one, and waits on its
// base clock: durations are the same on both.
type storeClock struct {
	clock
	store journal.Clock
}

func (c storeClock) Now() time.Time { return c.store.Now() }
