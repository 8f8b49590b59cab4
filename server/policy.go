// policy.go decides which answers are stored: the default status policy, the per-response
// override a handler sets through its request's context, and the header fields never kept.

package server

import (
	"context"
	"net/http"
	"sync/atomic"
)

// DefaultStoreStatus is the status policy when Options.StoreStatus is nil. It stores 2xx,
// 3xx and 4xx answers, which are final: the retry of a 201 must see the 201, and the retry
// of a 400 the same 400. It does not store (and so releases the key, letting a retry run
// the handler again):
//   - 408, 409, 425 and 429, which tell the client to try again later, usually before any
//     effect: storing them would replay "try again" forever;
//   - 5xx, on the view that a server error is raised before the effect, or rolled back with
//     it. A handler that fails after an effect it cannot undo must call StoreResponse, or
//     its 5xx is released and the retry runs the effect again. (Stripe stores 500s
//     instead; set StoreStatus to do the same.)
func DefaultStoreStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly,
		http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status < 500
}

// decision is what the handler told the middleware about its own response: an override of
// the status policy, and whether it completed the record itself. hold is the claim it runs
// under.
type decision struct {
	v         atomic.Int32
	completed atomic.Bool
	hold      Hold
}

const (
	decideByStatus int32 = iota
	decideStore
	decideDiscard
)

type decisionKey struct{}

// StoreResponse tells the middleware to store the response to the request whose context is
// ctx whatever its status, e.g. a 500 raised after an effect that cannot be undone: the
// retry must see it rather than run again. It reports whether ctx is a covered request's
// (false: there is nothing to store, the call did nothing). The last call wins.
func StoreResponse(ctx context.Context) bool { return decide(ctx, decideStore) }

// DiscardResponse tells the middleware not to store the response to the request whose
// context is ctx whatever its status, but release its key, so that a retry runs the
// handler again: e.g. a 400 from a check that a retry may pass. Call it only when the
// handler had no effect. It reports whether ctx is a covered request's. The last call wins.
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

// MarkCompleted tells the middleware that the handler completed its record itself, with
// the Hold from HoldFrom, inside its own transaction. The middleware still completes the
// record with the answer it captured: if the transaction committed, the Store refuses
// (the record is done) and the answer stored in the transaction is the one replayed, so it
// should be the one the handler writes; if it rolled back, the captured answer is stored.
// Either way the refusal is expected and not reported as a lost lease. It reports whether
// ctx is a covered request's.
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
