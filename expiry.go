// This file holds the KeyTTL rule: when an operation's idempotency key may be
// gone from the server, so that the operation must not be sent again. Every
// decision about it (Resume, the background resumer, a call that finds its
// operation in the journal) asks keyExpired. Retention pruning is the
// journal's (Journal.Prune); its relation to KeyTTL is told here.
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

import "time"

// keyExpired reports whether rec's idempotency key may be gone from the
// server at now: rec was created more than ttl ago. KeyTTL counts from
// creation, the earliest moment the server can have stored the key. A record
// dated after now (the clock went back) is aged from its latest time instead
// of now, so it never looks younger than when it was last written.
func keyExpired(rec *Record, now time.Time, ttl time.Duration) bool {
	if w := rec.written(); now.Before(w) {
		now = w
	}
	return now.Sub(rec.Created) > ttl
}

// keyExpired applies the KeyTTL rule to rec at the Transport's time.
func (t *Transport) keyExpired(rec *Record) bool {
	return keyExpired(rec, t.now(rec), t.cfg.KeyTTL)
}
