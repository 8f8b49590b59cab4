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

// Config is what a Keeper needs. Every field is required (but Renew, Cancel and Failed
// with KeepHolder).
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
	// Shared, if not nil, is the timer the Keeper waits on until its first renewal (all
	// Keepers sharing one must have the same Lease); nil means a timer of its own.
	Shared *Shared
}

// Holder is the holder's side of a Keeper, for KeepHolder: what Config's Renew, Cancel
// and Failed do, as methods of a value the holder has already, so that starting a Keeper
// makes no closures.
type Holder interface {
	Renew(ctx context.Context) error
	Cancel(cause error)
	Failed(err error)
}

// funcHolder is the Holder of a Config's funcs.
type funcHolder struct{ c *Config }

func (f funcHolder) Renew(ctx context.Context) error { return f.c.Renew(ctx) }
func (f funcHolder) Cancel(cause error)              { f.c.Cancel(cause) }
func (f funcHolder) Failed(err error)                { f.c.Failed(err) }

// Clock is the time a Keeper reads: System, or a fake one in tests.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, as time.AfterFunc does;
	// the Timer it returns reschedules or stops that call.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a call scheduled by Clock.AfterFunc; *time.Timer is one. It is an alias of
// its method set, so that a Clock can be written without importing this package
// (leasetest's, for this package's own tests).
type Timer = interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// System is the Clock of the running system (its monotonic time).
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time                            { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Keeper renews one lease until stopped. It costs no goroutine while nothing is due: one
// timer wakes it for the next renewal or the local deadline, whichever comes first, so a
// holder that stops before a third of a lease never renews at all. Its methods are safe to
// call from the goroutine that started it.
type Keeper struct {
	c     *Config // shared by every Keeper of a middleware: never changed
	h     Holder
	ctx   context.Context // its values only: renewals outlive the holder's cancellation
	timer Timer           // its own; nil while it waits on c.Shared

	mu       sync.Mutex
	shared   *Shared // while in c.Shared's list
	prev     *Keeper // its neighbours there
	next     *Keeper
	renewAt  time.Time // when the next renewal is due (while none is in flight)
	deadline time.Time // the local deadline: last confirmation + Lease - Margin
	cause    error     // Lost or Unconfirmed once Cancel was called
	renewing bool      // a renewal is in flight
	ended    bool      // stopped, or the lease was lost: no more renewals
	inflight sync.WaitGroup
}

// Keep starts renewing the lease confirmed at confirmed (the time the call that created
// or last renewed it was sent: the Store's lease cannot end before confirmed + Lease). It
// renews Lease/3 after each confirmed call was sent and, after a renewal with an unknown
// outcome, every Lease/10.
func Keep(ctx context.Context, c Config, confirmed time.Time) *Keeper {
	return start(ctx, &c, nil, confirmed)
}

// KeepHolder is Keep with the holder's side given by h; c's Renew, Cancel and Failed are
// not used. The Keeper reads *c until it is stopped, so that the Keepers of one
// middleware share one Config: c must not change meanwhile.
func KeepHolder(ctx context.Context, c *Config, h Holder, confirmed time.Time) *Keeper {
	return start(ctx, c, h, confirmed)
}

// start starts a Keeper; a nil h means c's funcs.
func start(ctx context.Context, c *Config, h Holder, confirmed time.Time) *Keeper {
	// Renewals are due a third of a lease after the send of the call they extend: a slow
	// claim (tried again, or answered late) is renewed at once rather than past its deadline.
	k := &Keeper{c: c, h: h, ctx: ctx, deadline: Deadline(confirmed, c.Lease), renewAt: confirmed.Add(c.Lease / 3)}
	if h == nil {
		k.h = funcHolder{k.c}
	}
	k.mu.Lock() // the timer may fire before k.timer is set
	defer k.mu.Unlock()
	if c.Shared == nil || !c.Shared.add(k) {
		k.timer = c.Clock.AfterFunc(k.renewAt.Sub(c.Clock.Now()), k.fire)
	}
	return k
}

// own gives k, whose first renewal Shared found due, a timer of its own, firing now.
func (k *Keeper) own() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.ended {
		k.timer = k.c.Clock.AfterFunc(0, k.fire)
	}
}

// Deadline is the local deadline of a lease of lease confirmed at confirmed.
func Deadline(confirmed time.Time, lease time.Duration) time.Time {
	return confirmed.Add(lease - Margin(lease))
}

// fire is the timer's call: it cancels the holder once the local deadline has passed and
// starts the renewal that is due, then sets the timer for what comes next. A call with
// nothing due (the timer was reset meanwhile) only sets the timer again.
func (k *Keeper) fire() {
	k.mu.Lock()
	if k.ended {
		k.mu.Unlock()
		return
	}
	now := k.c.Clock.Now()
	if !now.Before(k.deadline) {
		// Renewals go on: should one be confirmed again, the Store keeps the record from
		// other holders for as long as the work, cancelled now, takes to stop.
		k.cancel(k.c.Unconfirmed)
	}
	renew := !k.renewing && !now.Before(k.renewAt)
	if renew {
		k.renewing = true
		k.inflight.Add(1)
	}
	k.arm(now)
	k.mu.Unlock()
	if renew {
		k.renew(now)
	}
}

// arm sets the timer for the next event: the renewal due (none while one is in flight)
// or the local deadline (none once the holder was cancelled). Called with mu held.
func (k *Keeper) arm(now time.Time) {
	var next time.Time
	if !k.renewing {
		next = k.renewAt
	}
	if k.cause == nil && (next.IsZero() || k.deadline.Before(next)) {
		next = k.deadline
	}
	if !next.IsZero() {
		k.timer.Reset(next.Sub(now))
	}
}

// renew makes one renewal, sent at sent, and takes its outcome in.
func (k *Keeper) renew(sent time.Time) {
	defer k.inflight.Done()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.ctx), k.c.Timeout)
	err := k.h.Renew(ctx)
	cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.renewing = false
	if k.ended {
		return
	}
	now := k.c.Clock.Now()
	switch {
	case err == nil:
		k.deadline = Deadline(sent, k.c.Lease)
		k.renewAt = sent.Add(k.c.Lease / 3)
	case k.c.Refused(err):
		k.ended = true
		k.cancel(k.c.Lost)
		return
	default:
		k.h.Failed(err)
		k.renewAt = now.Add(max(k.c.Lease/10, time.Millisecond))
	}
	k.arm(now)
}

// cancel cancels the holder's work with cause, once. Called with mu held.
func (k *Keeper) cancel(cause error) {
	if k.cause == nil {
		k.cause = cause
		k.h.Cancel(cause)
	}
}

// Stop stops the renewals (one in flight ends on its own, within Timeout) and returns the
// local deadline of the last confirmed lease and why the holder's work was cancelled
// (Lost or Unconfirmed), or nil. Calling Stop again returns the same. Once Stop returns,
// Cancel is not called again.
func (k *Keeper) Stop() (deadline time.Time, cause error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ended = true
	if k.timer != nil {
		k.timer.Stop()
	} else if k.c.Shared != nil {
		k.c.Shared.remove(k)
	}
	return k.deadline, k.cause
}

// Idle waits, after Stop, until no renewal is in flight (each ends within Timeout): a
// renewal that lands after a hand-over (a Renew of 0) would take the record back.
func (k *Keeper) Idle() { k.inflight.Wait() }
