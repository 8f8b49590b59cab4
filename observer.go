// This file holds Observer, the hook for metrics: the attempt loop
// (attempt.go), the write-ahead (transport.go) and Resume (resume.go) report
// what happens to it, and the module idemotel turns the reports into
// OpenTelemetry metrics. The library itself depends on no metrics package.

package idem

import (
	"context"
	"sync/atomic"
	"time"
)

// Observer receives a report of every attempt, retry, write-ahead and
// operation result, for metrics. Set one in Options.Observer; nil means none.
// The module github.com/idem-go/idem/idemotel implements it with
// OpenTelemetry.
//
// Methods are called synchronously on the request path (the caller's
// goroutine, or a resumer's), so they must be fast and must not block; they
// are called concurrently, so an Observer must be safe for concurrent use.
// Events carry no URL, header, body or error text, so nothing secret reaches
// an Observer.
//
// Embed NopObserver in an implementation to keep compiling if methods are
// added to this interface later.
type Observer interface {
	// Attempt reports one attempt (one HTTP round trip), journaled or not,
	// once it has been classified. Attempts cut short by the caller's context
	// are not reported.
	Attempt(ctx context.Context, e AttemptEvent)

	// Retry reports a decision to wait and try again, before the wait.
	Retry(ctx context.Context, e RetryEvent)

	// RetryDenied reports a retry that the RetryBudget did not allow: e is
	// the retry that would have been made (N is 0 for a resume refused
	// before its first send; Wait is the time until the operation may be
	// tried again).
	RetryDenied(ctx context.Context, e RetryEvent)

	// Result reports where a call or a resume left a journaled operation:
	// settled, pending (the outcome still unknown), failed, or expired.
	// Together with ResultEvent.Resumed, these are Resume's outcomes.
	Result(ctx context.Context, e ResultEvent)

	// PendingChanged reports a change of the number of pending operations in
	// the journal: +1 for a write-ahead, -1 when one settles, fails or
	// expires, +n when a Transport is built over a journal holding n, and -n
	// when its Client is closed. Summed, the deltas are a gauge (an
	// OpenTelemetry UpDownCounter), correct across several Clients.
	PendingChanged(delta int)

	// WriteAhead reports a write-ahead commit (fsync included) and how long
	// it took, in wall time. err is non-nil if it failed and nothing was
	// sent.
	WriteAhead(ctx context.Context, d time.Duration, err error)
}

// AttemptEvent describes one attempt.
type AttemptEvent struct {
	Method    string
	Journaled bool          // the call is journaled
	Resumed   bool          // the call was made by Resume
	N         int           // attempt number within this call, from 1
	Status    int           // response status, or 0 if the attempt got no response
	Class     Class         // what the Classifier made of it
	Duration  time.Duration // until the response headers or the error
}

// RetryEvent describes a retry about to happen.
type RetryEvent struct {
	Method     string
	Journaled  bool
	Resumed    bool
	N          int           // the attempt that is being retried, from 1
	Status     int           // its status, or 0
	Class      Class         // ClassRetry or ClassRetryIfSafe
	Wait       time.Duration // how long the call waits before the next attempt
	RetryAfter bool          // the server chose the wait (Retry-After)
}

// ResultEvent describes where a call or resume left a journaled operation.
type ResultEvent struct {
	State    State // StateSettled, StatePending, StateFailed or StateExpired
	Status   int   // the final status if StateSettled, else the last status seen or 0
	Attempts int   // attempts recorded for the operation, across calls and restarts
	Resumed  bool  // the call was made by Resume
	// NotSent is set, with State Pending, for a resume that sent nothing
	// because PrepareResume failed or did not restore a sensitive header.
	NotSent bool
}

// NopObserver is an Observer that does nothing. Embed it in an Observer that
// implements only some methods.
type NopObserver struct{}

func (NopObserver) Attempt(context.Context, AttemptEvent)            {}
func (NopObserver) Retry(context.Context, RetryEvent)                {}
func (NopObserver) RetryDenied(context.Context, RetryEvent)          {}
func (NopObserver) Result(context.Context, ResultEvent)              {}
func (NopObserver) PendingChanged(int)                               {}
func (NopObserver) WriteAhead(context.Context, time.Duration, error) {}

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

// result reports where a call left a journaled operation.
func (t *Transport) result(ctx context.Context, o *op) {
	t.cfg.observer.Result(ctx, ResultEvent{State: o.rec.State, Status: o.rec.Status,
		Attempts: o.rec.Attempts, Resumed: o.resumed})
}
