// This file holds how a call ends: the operation settles, fails, or stays
// pending and the caller gets a *PendingError; journal.Apply moves the
// record, and expiry is judged at the Transport's time and KeyTTL.

package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/journal"
)

// settle records a final response and returns it.
func (t *Transport) settle(ctx context.Context, o *op, resp *http.Response) (*http.Response, error) {
	if o.rec == nil {
		return resp, nil
	}
	t.crash(crashResponse)
	if resp.StatusCode/100 == 3 && t.redirected(ctx, o, resp) {
		return resp, nil // a 307 or 308: pending at its Location
	}
	// The response is final; losing the settle only costs one harmless replay with
	// the same key on the next Resume.
	t.recordSettled(ctx, o, journal.EventSettle, resp.StatusCode, journal.Deferred,
		"idem: settle not recorded, operation will be replayed")
	return resp, nil
}

// recordSettled moves o's record through ev (settle or resolve) with status, writes it
// with durability d, and reports the change; a write that fails is logged as warn.
func (t *Transport) recordSettled(ctx context.Context, o *op, ev journal.Event, status int, d journal.Durability, warn string) {
	before, err := journal.Apply(o.rec, ev, journal.Change{Now: t.clock.Now(), Status: status})
	if err == nil {
		err = t.journal.Update(ctx, o.rec, d)
	}
	if err != nil {
		t.log(ctx, slog.LevelWarn, warn, o, "err", t.safeErr(o, err))
	} else {
		t.stateChanged(before, StateSettled)
	}
	t.result(ctx, o)
}

// fail marks an operation that failed before the server could have acted
// and returns the error.
func (t *Transport) fail(ctx context.Context, o *op, cause error) error {
	err := fmt.Errorf("%w: %w", ErrPermanent, cause)
	if o.rec == nil {
		return err
	}
	before, serr := journal.Apply(o.rec, journal.EventFail, journal.Change{Now: t.clock.Now(), Error: t.safeErr(o, cause)})
	if serr == nil {
		serr = t.journal.Update(ctx, o.rec, journal.Deferred)
	}
	if serr != nil {
		return errors.Join(err, serr)
	}
	t.stateChanged(before, StateFailed)
	t.result(ctx, o)
	return err
}

// denied ends a call whose retry to host the RetryBudget refused after
// attempt n (of the given class), like giveUp.
func (t *Transport) denied(ctx context.Context, o *op, host string, n int, class Class, last outcome, next time.Time) (*http.Response, error) {
	t.cfg.observer.RetryDenied(ctx, RetryEvent{Method: o.method, Journaled: o.rec != nil, Resumed: o.resumed,
		N: n, Status: last.status, Class: class, Wait: next.Sub(t.clock.Now())})
	t.log(ctx, slog.LevelInfo, "idem: retry denied by the retry budget", o, "attempt", n,
		"host", host, "status", last.status)
	last.err = budgetError(host, last.err)
	return t.giveUp(ctx, o, last, next)
}

// budgetError says a retry to host was denied, after the last error if any.
func budgetError(host string, last error) error {
	err := fmt.Errorf("%w for %s", ErrRetryBudgetExhausted, host)
	if last != nil {
		err = fmt.Errorf("%w; last error: %w", err, last)
	}
	return err
}

// giveUp ends a call whose outcome is still unknown. A journaled operation
// stays pending and the caller gets a *PendingError; an unjournaled request
// returns its last response, or its last error.
func (t *Transport) giveUp(ctx context.Context, o *op, last outcome, next time.Time) (*http.Response, error) {
	if o.rec == nil {
		if last.resp != nil {
			return last.resp, nil
		}
		return nil, last.err
	}
	discard(last.resp)
	if o.rec.State == StateSettled {
		// A call re-sent a settled operation and got no answer; the stored
		// outcome stands and there is nothing to resume.
		return nil, &AlreadySettledError{OperationID: o.rec.OperationID, Key: o.rec.Key,
			Status: o.rec.Status, Settled: o.rec.Updated}
	}
	// The error text is journaled: mask what a base RoundTripper may quote.
	before, err := journal.Apply(o.rec, journal.EventRetry, journal.Change{Status: last.status, Next: next, Error: t.safeErr(o, last.err)})
	perr := &PendingError{Key: o.rec.Key, OperationID: o.rec.OperationID, Attempts: o.rec.Attempts,
		LastStatus: last.status, Err: last.err, NextAttempt: next}
	if err == nil {
		err = t.journal.Update(ctx, o.rec, journal.Deferred)
	}
	if err != nil {
		// The record written ahead is still pending on disk; only the attempt
		// count and next-attempt time are lost.
		t.log(ctx, slog.LevelWarn, "idem: pending state not recorded", o, "err", t.safeErr(o, err))
	} else {
		t.stateChanged(before, StatePending)
	}
	t.result(ctx, o)
	if !o.resumed { // Resume logs its own outcome
		t.log(ctx, slog.LevelWarn, "idem: operation left pending", o, "attempts", o.rec.Attempts,
			"status", last.status, "next_attempt", next, "err", t.safeErr(o, last.err))
	}
	t.resumers.notePending(next)
	return nil, perr
}

func keyExpired(rec *Record, now time.Time, ttl time.Duration) bool {
	return journal.Expired(rec, now, ttl)
}

// keyExpired applies the KeyTTL rule to rec at the Transport's time.
func (t *Transport) keyExpired(rec *Record) bool {
	return journal.Expired(rec, t.now(rec), t.cfg.KeyTTL)
}

// dueAt is journal.Due under the Transport's KeyTTL: a NextAttempt with no
// LastAttempt waits at most maxWait, the longest wait idem chooses.
func (c *config) dueAt(rec *Record, now time.Time) time.Time {
	return journal.Due(rec, now, c.KeyTTL, c.maxWait())
}

func (c *config) maxWait() time.Duration { return max(c.MaxRetryAfter, c.MaxInterval) }

// dueAt is rec's due time at the Transport's time, and that time.
func (t *Transport) dueAt(rec *Record) (due, now time.Time) {
	now = t.now(rec)
	return t.cfg.dueAt(rec, now), now
}

// pendingGauge counts this Transport's pending operations, so that closing a
// Client can take them off the Observer's gauge.
type pendingGauge struct{ n atomic.Int64 }

// stateChanged reports a record's move from one state to another (from 0 for
// a new record) to the pending gauge.
func (t *Transport) stateChanged(from, to State) {
	switch {
	case from != StatePending && to == StatePending:
		t.pending.n.Add(1)
		t.cfg.observer.PendingChanged(1)
	case from == StatePending && to != StatePending:
		t.pending.n.Add(-1)
		t.cfg.observer.PendingChanged(-1)
	}
}
