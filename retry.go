// This file holds the waiting between attempts: jittered exponential backoff
// or Options.Backoff, the server's Retry-After (RFC 9110 section 10.2.3),
// and the injectable clock, which never reads earlier than it already did.

package idem

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/idem-go/idem/journal"
)

// clock is the time source of the attempt loop. Tests replace it.
type clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends, whichever is first, and returns
	// ctx.Err() in the second case.
	Sleep(ctx context.Context, d time.Duration) error
	// After returns a channel that receives once d has passed, and a
	// function that stops the timer early.
	After(d time.Duration) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (realClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// schedule yields the waits of one call. It is not safe for concurrent use;
// each call makes its own.
type schedule struct {
	cfg *config
	clk clock
	b   *backoff.ExponentialBackOff // made at the first backoff: most calls never wait
}

// backoff returns the backoff wait after attempt n, always in (0,
// MaxInterval]: Options.Backoff's, or the next of the exponential backoff.
func (s *schedule) backoff(n int) time.Duration {
	if s.cfg.Backoff != nil {
		return clampWait(s.cfg.Backoff(n), s.cfg.MaxInterval)
	}
	if s.b == nil {
		// Jitter multiplies an interval by up to 1+RandomizationFactor: capped
		// by that factor, every wait stays within MaxInterval, still spread.
		capped := time.Duration(float64(s.cfg.MaxInterval) / (1 + s.cfg.RandomizationFactor))
		s.b = backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(min(s.cfg.InitialInterval, capped)),
			backoff.WithMultiplier(s.cfg.Multiplier),
			backoff.WithRandomizationFactor(s.cfg.RandomizationFactor),
			backoff.WithMaxInterval(capped),
			backoff.WithMaxElapsedTime(0),
			backoff.WithClockProvider(s.clk),
		)
	}
	return clampWait(s.b.NextBackOff(), s.cfg.MaxInterval)
}

// wait returns how long to wait after attempt n's retryable outcome and
// whether the server chose it. A Retry-After on the response wins over
// backoff; a date in the past gives a short random wait no longer than
// InitialInterval.
func (s *schedule) wait(resp *http.Response, now time.Time, n int) (time.Duration, bool) {
	if resp != nil {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			if d <= 0 {
				return clampWait(rand.N(s.cfg.InitialInterval)+1, s.cfg.InitialInterval), true
			}
			return d, true
		}
	}
	return s.backoff(n), false
}

// clampWait keeps d in (0, limit]. A wait that rounded down to nothing becomes
// a millisecond, or limit if that is shorter, so retries never spin.
func clampWait(d, limit time.Duration) time.Duration {
	if d <= 0 {
		d = time.Millisecond
	}
	return min(d, limit)
}

// parseRetryAfter reads a Retry-After value: delta-seconds (1*DIGIT) or an
// HTTP-date in any of the three forms of RFC 9110 section 5.6.7, read as UTC. A
// past date gives 0. Negative, fractional, empty or unparseable values give
// ok=false. Values too large for a time.Duration saturate.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(math.MaxInt64/time.Second) {
			return math.MaxInt64, true // only overflow fails on digits
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := parseHTTPDate(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// parseHTTPDate is http.ParseTime read in UTC: http.ParseTime's RFC 850 layout
// takes any zone abbreviation and looks it up in time.Local, so "EST" would
// mean UTC-5 on a machine in New York and UTC elsewhere.
func parseHTTPDate(v string) (t time.Time, err error) {
	for _, layout := range []string{http.TimeFormat, time.RFC850, time.ANSIC} {
		if t, err = time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return t, err
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

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

// journalClock returns the clock of a Transport over j (nil: none): base, or
// j's time if j keeps one (journal.Clock), never earlier than the newest
// time j holds (Store.LatestWritten).
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
			// This goroutine may have stalled since it read the clock: read
			// again before taking it for a step, which would be for good.
			raw, fresh = c.base.Now(), true
		case n < last-int64(stepTolerance):
			// Earlier than a time seen, read again: the clock went back.
			c.skew.CompareAndSwap(skew, skew+(last-n))
		case n <= last || c.last.CompareAndSwap(last, n):
			// A little behind the latest is goroutines racing, not a step.
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

// beyondDeadline reports whether waiting wait from now reaches ctx's deadline.
func beyondDeadline(ctx context.Context, now time.Time, wait time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return ok && !now.Add(wait).Before(deadline)
}
