// This file asks the state machine's predicates (journal/state.go) at the
// Transport's time and KeyTTL: whether an operation's key may be gone from
// the server (keyExpired), when it may be sent again (dueAt), and what a call
// that names it may do (reuse, in transport.go). Retention pruning is the
// journal's (boltjournal.Journal.Prune); its relation to KeyTTL is told here.
//
// How a clock step moves each decision:
//
//   - Step back (NTP, VM restore): records look younger. For KeyTTL that is
//     the dangerous side, a re-send after the server forgot the key. The
//     Transport's clock never reads earlier than a time in the journal
//     (clockstep.go), and a record dated in the future is aged from its own
//     latest time, never less than 0: what is lost is only the real time
//     that passed while the process was down and the clock stood behind.
//     Pruning then comes later: records are kept longer, which is safe.
//   - Step forward: records look older. An operation may expire early, which
//     is safe: ErrKeyExpired means "reconcile", never a second effect. A
//     settled record may be pruned early, and an operation ID reused after
//     that would mint a second key while the server may still replay the
//     first: Retention is never below KeyTTL, and the difference (6 days by
//     default) is the forward step a journal absorbs without that risk.

package idem

import (
	"time"

	"github.com/idem-go/idem/journal"
)

// keyExpired is journal.Expired.
func keyExpired(rec *Record, now time.Time, ttl time.Duration) bool {
	return journal.Expired(rec, now, ttl)
}

// keyExpired applies the KeyTTL rule to rec at the Transport's time.
func (t *Transport) keyExpired(rec *Record) bool {
	return journal.Expired(rec, t.now(rec), t.cfg.KeyTTL)
}

// dueAt is journal.Due under the Transport's KeyTTL. A NextAttempt with no
// LastAttempt, which idem never writes, waits at most
// max(MaxRetryAfter, MaxInterval): the longest wait idem chooses. The
// Transport's clock never reads earlier than rec's LastAttempt
// (clockstep.go), so a stored wait is never stretched by a clock set back.
func (c *config) dueAt(rec *Record, now time.Time) time.Time {
	return journal.Due(rec, now, c.KeyTTL, c.maxWait())
}

func (c *config) maxWait() time.Duration { return max(c.MaxRetryAfter, c.MaxInterval) }

// dueAt is rec's due time at the Transport's time, and that time.
func (t *Transport) dueAt(rec *Record) (due, now time.Time) {
	now = t.now(rec)
	return t.cfg.dueAt(rec, now), now
}
