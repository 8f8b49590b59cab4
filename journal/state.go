// This file is an operation's state machine: its states, the one table of
// the transitions allowed between them, the functions that make each
// transition, and the predicates every decision about an operation asks:
// Expired (KeyTTL), Due (when it may be sent again) and Reusable (what a
// call that names it may do). Everything else calls these.

package journal

import (
	"fmt"
	"time"
)

// State is where an operation is in its life.
type State uint8

const (
	// StatePending: the outcome is not known yet; a resume sends it again.
	StatePending State = iota + 1
	// StateSettled: a final response was received.
	StateSettled
	// StateExpired: pending for longer than KeyTTL; never re-sent blindly.
	StateExpired
	// StateFailed: failed permanently before the server could have acted.
	StateFailed
)

func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateSettled:
		return "settled"
	case StateExpired:
		return "expired"
	case StateFailed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", s)
}

// Event is what happens to an operation.
type Event uint8

const (
	EventCreate  Event = iota + 1 // written ahead, before the first attempt
	EventRetry                    // an attempt left the outcome unknown, or a redirect moved it
	EventSettle                   // a final response arrived
	EventFail                     // it failed before the server could have acted
	EventRepend                   // a failed operation is sent again, or an expired one found not to have happened
	EventExpire                   // it stayed pending past KeyTTL
	EventResolve                  // an operator reconciled it: settled by hand
	EventDiscard                  // an operator gave it up: expired by hand
)

var eventNames = [...]string{EventCreate: "create", EventRetry: "retry", EventSettle: "settle",
	EventFail: "fail", EventRepend: "repend", EventExpire: "expire", EventResolve: "resolve", EventDiscard: "discard"}

func (e Event) String() string {
	if int(e) < len(eventNames) && eventNames[e] != "" {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", e)
}

// transitions is the table of allowed transitions: for each event, the
// state it leaves each allowed source state in (0 is "no record yet").
// A settled operation sent again within KeyTTL settles again (the server
// replays); nothing leaves failed but a repend, nor expired but Resolve or a
// repend (reconciliation found it never happened).
var transitions = map[Event]map[State]State{
	EventCreate:  {0: StatePending},
	EventRetry:   {StatePending: StatePending},
	EventSettle:  {StatePending: StateSettled, StateSettled: StateSettled},
	EventFail:    {StatePending: StateFailed},
	EventRepend:  {StateFailed: StatePending, StateExpired: StatePending},
	EventExpire:  {StatePending: StateExpired},
	EventResolve: {StatePending: StateSettled, StateExpired: StateSettled},
	EventDiscard: {StatePending: StateExpired},
}

// Next returns the state event leaves an operation in state from, and
// whether the table allows it.
func Next(from State, e Event) (State, bool) {
	to, ok := transitions[e][from]
	return to, ok
}

// TransitionError is returned by Apply for a transition the table does not
// allow.
type TransitionError struct {
	From  State
	Event Event
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("journal: cannot %s an operation that is %s", e.Event, e.From)
}

// Change is what a transition writes besides the state; each event reads
// the fields its function documents.
type Change struct {
	Now    time.Time // when it happens: the record's Updated
	Status int       // the response's status (settle, retry, resolve)
	Next   time.Time // earliest next attempt (retry)
	Error  string    // the error to keep (fail, retry, discard's reason)
	Body   []byte    // the body sent again (repend)
}

// Apply moves rec through event e, if the table allows it, and writes the
// fields that go with it:
//
//   - create: Created, Updated = Now.
//   - retry: Status, NextAttempt = Next, LastError = Error (not Updated:
//     the state did not change).
//   - settle, resolve: Status, Updated; the body, NextAttempt and
//     LastError are cleared.
//   - fail: LastError, Updated.
//   - repend: Body (the bytes sent again), Updated is kept.
//   - expire: Updated.
//   - discard: Updated, LastError ("idem: discarded by hand", then ": "
//     and Error if any); NextAttempt is cleared.
//
// It returns the state rec had, and a *TransitionError, leaving rec as it
// was, for a transition the table does not allow.
func Apply(rec *Record, e Event, c Change) (from State, err error) {
	from = rec.State
	to, ok := Next(from, e)
	if !ok {
		return from, &TransitionError{From: from, Event: e}
	}
	rec.State = to
	switch e {
	case EventCreate:
		rec.Created, rec.Updated = c.Now, c.Now
	case EventRetry:
		rec.Status, rec.NextAttempt, rec.LastError = c.Status, c.Next, c.Error
	case EventSettle, EventResolve:
		rec.Status, rec.Updated = c.Status, c.Now
		rec.Body, rec.LastError, rec.NextAttempt = nil, "", time.Time{}
	case EventFail:
		rec.LastError, rec.Updated = c.Error, c.Now
	case EventRepend:
		rec.Body = c.Body
	case EventExpire:
		rec.Updated = c.Now
	case EventDiscard:
		rec.Updated, rec.NextAttempt, rec.LastError = c.Now, time.Time{}, DiscardedError
		if c.Error != "" {
			rec.LastError += ": " + c.Error
		}
	}
	return from, nil
}

// DiscardedError is the LastError of an operation discarded by hand.
const DiscardedError = "idem: discarded by hand"

// Expired reports whether rec's idempotency key may be gone from the server
// at now: rec was created more than ttl ago. KeyTTL counts from creation,
// the earliest moment the server can have stored the key. A record dated
// after now (the clock went back) is aged from its latest time instead of
// now, so it never looks younger than when it was last written.
func Expired(rec *Record, now time.Time, ttl time.Duration) bool {
	if w := rec.Written(); now.Before(w) {
		now = w
	}
	return now.Sub(rec.Created) > ttl
}

// Due returns when rec may next be sent, judged at now: at once (a time not
// after now) if it is past ttl (KeyTTL), since then it is only reported
// expired, else its NextAttempt.
//
// A stored NextAttempt never holds rec back longer than the wait chosen when
// it was stored (NextAttempt - LastAttempt) measured from now: should now
// be earlier than LastAttempt (a clock set back), the wait is counted from
// now instead. A NextAttempt with no LastAttempt, which idem never writes,
// waits at most maxWait.
func Due(rec *Record, now time.Time, ttl, maxWait time.Duration) time.Time {
	next := rec.NextAttempt
	if !now.Before(next) || Expired(rec, now, ttl) {
		return now
	}
	if rec.LastAttempt.IsZero() {
		return minTime(next, now.Add(maxWait))
	}
	if now.Before(rec.LastAttempt) {
		return minTime(next, now.Add(max(next.Sub(rec.LastAttempt), 0)))
	}
	return next
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Reuse is what a call that names an operation already in the journal may
// do with it.
type Reuse uint8

const (
	// ReuseSend: send it (again) with its key. For a settled operation
	// within KeyTTL the server replays its stored response.
	ReuseSend Reuse = iota + 1
	// ReuseExpired: nothing is sent; it expired, or is pending past KeyTTL.
	ReuseExpired
	// ReuseSettled: nothing is sent; it settled longer than KeyTTL ago and
	// the server may have forgotten the key.
	ReuseSettled
	// ReuseNotDue: nothing is sent yet; the server asked for time
	// (Retry-After) and the operation is due later.
	ReuseNotDue
)

// Reusable decides what a call naming rec may do at now, under KeyTTL ttl
// and maxWait as for Due; due is when rec is due.
func Reusable(rec *Record, now time.Time, ttl, maxWait time.Duration) (r Reuse, due time.Time) {
	expired, due := Expired(rec, now, ttl), Due(rec, now, ttl, maxWait)
	switch {
	case rec.State == StateExpired || (rec.State == StatePending && expired):
		return ReuseExpired, due
	case rec.State == StateSettled && expired:
		return ReuseSettled, due
	case rec.State == StatePending && now.Before(due):
		return ReuseNotDue, due
	}
	return ReuseSend, due
}
