// This file decides when a pending operation may be sent again: one rule for
// Resume, the background resumer's wake-up, and a call that finds its
// operation pending (Transport.reuse).

package idem

import "time"

// dueAt returns when rec may next be sent, judged at now: at once (a time not
// after now) if it is past KeyTTL, since then it is only reported expired,
// else its NextAttempt.
//
// A stored NextAttempt never holds rec back longer than the wait chosen when
// it was stored (NextAttempt - LastAttempt: the backoff, at most
// MaxInterval, or the server's Retry-After, which may be longer than
// MaxRetryAfter) measured from now. The Transport's clock guarantees that by
// never reading earlier than rec's LastAttempt (clockstep.go); should now
// still be earlier (a clock that does not observe the journal), the wait is
// counted from now instead. A NextAttempt with no LastAttempt, which idem
// never writes, waits at most max(MaxRetryAfter, MaxInterval).
func (c *config) dueAt(rec *Record, now time.Time) time.Time {
	next := rec.NextAttempt
	if !now.Before(next) || keyExpired(rec, now, c.KeyTTL) {
		return now
	}
	if rec.LastAttempt.IsZero() {
		return minTime(next, now.Add(max(c.MaxRetryAfter, c.MaxInterval)))
	}
	if now.Before(rec.LastAttempt) {
		return minTime(next, now.Add(max(next.Sub(rec.LastAttempt), 0)))
	}
	return next
}

// dueAt is rec's due time at the Transport's time, and that time.
func (t *Transport) dueAt(rec *Record) (due, now time.Time) {
	now = t.now(rec)
	return t.cfg.dueAt(rec, now), now
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
