// Package lease keeps a holder's lease on an idempotency record confirmed, for the
// middleware (package server) and the consumer (server/consumer) alike: it renews the
// lease on a schedule, and cancels the holder's work when the lease can no longer be
// confirmed in time, before any other holder may take the record over.
package lease

import (
	"context"
	"sync"
	"time"
)

// Margin is how much of a lease a holder gives up: it stops Margin(lease) before the lease
// it last confirmed would end, so that its work is cancelled before the Store lets another
// holder in, whatever the network did to the renewal's reply. A fifth of the lease.
func Margin(lease time.Duration) time.Duration { return lease / 5 }

// Config is what a Keeper needs. Every field is required.
type Config struct {
	Lease   time.Duration                   // what each renewal asks for
	Timeout time.Duration                   // bounds each renewal call
	Renew   func(ctx context.Context) error // one renewal of the lease
	// Refused reports whether Renew's error is the Store's refusal (the lease is lost for
	// good); any other error leaves the renewal's outcome unknown, and it is tried again.
	Refused func(error) bool
	// Cancel cancels the holder's work, with Lost when the Store refused a renewal or
	// Unconfirmed when the local deadline passed first.
	Cancel            context.CancelCauseFunc
	Lost, Unconfirmed error
	// Failed is told of each renewal whose outcome is unknown (for the logs).
	Failed func(error)
	Clock  Clock
}

// Clock is the time a Keeper reads: System, or a fake one in tests.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// System is the Clock of the running system (its monotonic time).
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Keeper renews one lease until stopped. Its methods are safe to call from the goroutine
// that started it.
type Keeper struct {
	c        Config
	ctx      context.Context // values only: renewals outlive no cancellation of the holder's
	quit     chan struct{}
	done     chan struct{}
	deadline time.Time // the local deadline: last confirmation + Lease - Margin
	cause    error     // Lost or Unconfirmed once Cancel was called
	inflight sync.WaitGroup
}

// Keep starts renewing the lease confirmed at confirmed (the time the call that created
// or last renewed it was sent: the Store's lease cannot end before confirmed + Lease). It
// renews Lease/3 after each confirmed call was sent and, after a renewal with an unknown
// outcome, every Lease/10.
func Keep(ctx context.Context, c Config, confirmed time.Time) *Keeper {
	k := &Keeper{c: c, ctx: context.WithoutCancel(ctx), quit: make(chan struct{}), done: make(chan struct{}),
		deadline: Deadline(confirmed, c.Lease)}
	now := c.Clock.Now()
	// Renewals are due a third of a lease after the send of the call they extend: a slow
	// claim (tried again, or answered late) is renewed at once rather than past its deadline.
	renewAt := c.Clock.After(confirmed.Add(c.Lease / 3).Sub(now))
	deadline := c.Clock.After(k.deadline.Sub(now))
	go k.loop(renewAt, deadline)
	return k
}

// Deadline is the local deadline of a lease of lease confirmed at confirmed.
func Deadline(confirmed time.Time, lease time.Duration) time.Time {
	return confirmed.Add(lease - Margin(lease))
}

type result struct {
	sent time.Time
	err  error
}

func (k *Keeper) loop(renewAt, deadline <-chan time.Time) {
	defer close(k.done)
	c := k.c
	results := make(chan result, 1) // one renewal in flight at most; it never blocks
	for {
		select {
		case <-k.quit:
			return
		case <-renewAt:
			renewAt = nil
			sent := c.Clock.Now()
			k.inflight.Add(1)
			go func() {
				defer k.inflight.Done()
				ctx, cancel := context.WithTimeout(k.ctx, c.Timeout)
				defer cancel()
				results <- result{sent, c.Renew(ctx)}
			}()
		case r := <-results:
			switch {
			case r.err == nil:
				now := c.Clock.Now()
				k.deadline = Deadline(r.sent, c.Lease)
				deadline = c.Clock.After(k.deadline.Sub(now))
				renewAt = c.Clock.After(r.sent.Add(c.Lease / 3).Sub(now))
			case c.Refused(r.err):
				k.cancel(c.Lost)
				return
			default:
				c.Failed(r.err)
				renewAt = c.Clock.After(max(c.Lease/10, time.Millisecond))
			}
		case <-deadline:
			// Renewals go on: should one be confirmed again, the Store keeps the record
			// from other holders for as long as the work, cancelled now, takes to stop.
			deadline = nil
			k.cancel(c.Unconfirmed)
		}
	}
}

func (k *Keeper) cancel(cause error) {
	if k.cause == nil {
		k.cause = cause
		k.c.Cancel(cause)
	}
}

// Stop stops the renewals (one in flight ends on its own, within Timeout) and returns the
// local deadline of the last confirmed lease and why the holder's work was cancelled
// (Lost or Unconfirmed), or nil. Calling Stop again returns the same.
func (k *Keeper) Stop() (deadline time.Time, cause error) {
	select {
	case <-k.quit:
	default:
		close(k.quit)
	}
	<-k.done
	return k.deadline, k.cause
}

// Idle waits, after Stop, until no renewal is in flight (each ends within Timeout): a
// renewal that lands after a hand-over (a Renew of 0) would take the record back.
func (k *Keeper) Idle() { k.inflight.Wait() }
