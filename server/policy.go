// policy.go decides which answers are stored: the default status policy, the per-response
// override a handler sets through its request's context, and the header fields never kept.

package server

import (
	"context"
	"net/http"
	"sync/atomic"
)

// Outcome is what a handler's answer says about its effect, which decides what becomes of
// its record (the table in the package doc and server/README.md).
type Outcome int

const (
	// OutcomeFinal: the answer is final; it is stored and replayed to every retry.
	OutcomeFinal Outcome = iota + 1
	// OutcomeNoEffect: nothing happened (the handler said so, or asked the client to
	// come back later); the key is released and a retry runs the handler again.
	OutcomeNoEffect
	// OutcomeUncertain: the effect may have happened (a 5xx, a panic); the record goes to
	// Options.Recover, or, without one, the answer is stored and replayed: never re-run
	// blindly (seed article 2, step 5).
	OutcomeUncertain
)

// String names o for logs.
func (o Outcome) String() string {
	switch o {
	case OutcomeFinal:
		return "final"
	case OutcomeNoEffect:
		return "no effect"
	case OutcomeUncertain:
		return "uncertain"
	}
	return "Outcome(" + itoa(int(o)) + ")"
}

// DefaultClassify is the status policy when Options.Classify is nil:
//   - 408, 409, 425 and 429 ask the client to come back later, before any effect:
//     OutcomeNoEffect (storing them would replay "come back later" forever);
//   - other 2xx, 3xx and 4xx are final: the retry of a 201 sees the 201, and the retry
//     of a 400 the same 400;
//   - 5xx is OutcomeUncertain: a server error does not prove that nothing happened (a
//     handler may have charged a card and then failed to write its own row). A handler
//     that knows better says so: DiscardResponse, or a transaction that rolled back
//     (pgstore.CompleteTx).
func DefaultClassify(status int) Outcome {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly,
		http.StatusTooManyRequests:
		return OutcomeNoEffect
	}
	if status >= 500 {
		return OutcomeUncertain
	}
	return OutcomeFinal
}

// ClassifyTransactional is DefaultClassify for handlers that are fully transactional,
// whose every effect is rolled back when they answer 5xx: a 5xx is OutcomeNoEffect, so
// its key is released and a retry runs the handler again. Set it as Options.Classify only
// then.
func ClassifyTransactional(status int) Outcome {
	if status >= 500 {
		return OutcomeNoEffect
	}
	return DefaultClassify(status)
}

// decision is what the handler told the middleware about its own response: an override of
// the status policy, and whether it completed the record itself. hold is the claim it runs
// under.
type decision struct {
	v         atomic.Int32
	completed atomic.Bool
	lost      atomic.Bool // the lease keeper saw the lease taken over
	hold      Hold
	keeper    holder // the lease keeper's side of the request (holder.go)
}

const (
	decideByStatus int32 = iota
	decideStore
	decideDiscard
)

type decisionKey struct{}

// StoreResponse tells the middleware that the answer to the request whose context is ctx
// is final whatever its status (OutcomeFinal), e.g. a 500 raised after an effect that
// cannot be undone: the retry sees it rather than run again. It reports whether ctx is a covered request's (false: the call did nothing). The last call
// wins.
func StoreResponse(ctx context.Context) bool { return decide(ctx, decideStore) }

// DiscardResponse tells the middleware that the handler of the request whose context is
// ctx had no effect, whatever its status (OutcomeNoEffect): its key is released, so that
// a retry runs the handler again, e.g. after a 503 raised before any effect, or a 400 from
// a check that a retry may pass; it holds even if the handler then panics. It reports
// whether ctx is a covered request's. The last call wins.
func DiscardResponse(ctx context.Context) bool { return decide(ctx, decideDiscard) }

// Hold is the claim a covered request's handler runs under: the record's Scope and the
// holder's fencing token. It is a plain value, safe to copy and share.
type Hold struct {
	Scope Scope
	Token string
}

// HoldFrom returns the claim the request whose context is ctx runs under, and false
// outside a covered request. A Store that can complete a record inside the service's own
// transaction (so the business row and the stored answer commit together, as the
// PostgreSQL store does) takes it; the handler then calls MarkCompleted.
func HoldFrom(ctx context.Context) (Hold, bool) {
	d, ok := ctx.Value(decisionKey{}).(*decision)
	if !ok {
		return Hold{}, false
	}
	return d.hold, true
}

// MarkCompleted tells the middleware that the handler completes its record itself, with
// the Hold from HoldFrom, inside its own transaction together with its effects (a Store
// method such as pgstore's CompleteTx calls it). When the handler returns, the middleware
// then releases the record if it is still in progress under the handler's token: the
// transaction did not commit, so nothing happened and a retry runs the handler again. If
// it committed, the record is done, the release is refused as expected, and the answer
// stored in the transaction is the one replayed (so it should be the one the handler
// writes). It reports whether ctx is a covered request's.
func MarkCompleted(ctx context.Context) bool {
	d, ok := ctx.Value(decisionKey{}).(*decision)
	if ok {
		d.completed.Store(true)
	}
	return ok
}

func decide(ctx context.Context, v int32) bool {
	d, ok := ctx.Value(decisionKey{}).(*decision)
	if ok {
		d.v.Store(v)
	}
	return ok
}

// hopByHop are the header fields that describe one connection, not the response (RFC 9110
// section 7.6.1), plus the length, which the replay sets from the stored body.
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "TE", "Trailer",
	"Transfer-Encoding", "Upgrade", "Content-Length",
}
