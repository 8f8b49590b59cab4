// This file holds ResponseInfo: what a response idem returned tells its
// caller about the call behind it (its idempotency key and operation ID), as
// stripe-go's LastResponse.IdempotencyKey does. The attempt loop
// (attempt.go) puts it on every response it returns.

package idem

import (
	"context"
	"net/http"
	"sync/atomic"
)

// Info describes the call a response answers.
type Info struct {
	// Key is the idempotency key sent with every attempt: the caller's
	// (WithKey or the key header) or the one idem minted. "" for a request
	// sent without one (an unjournaled GET, say).
	Key string
	// OperationID is the caller's operation ID (WithOperationID), or "".
	OperationID string
	// Journaled reports whether the operation is in the journal: false for
	// a request that is only retried (an idempotent method, or
	// WithoutJournal), whose key, if any, was kept in memory for this call.
	Journaled bool
}

type infoCtxKey struct{}

// callInfo is the Info a call's responses carry, in their request's
// context from the first attempt on; ready is set once the call has
// returned a response and info is final. Until then ResponseInfo reports
// nothing, as for a response idem did not return (a Classifier or a base
// RoundTripper sees the attempts' responses first).
type callInfo struct {
	info  Info
	ready atomic.Bool
}

// ResponseInfo returns the Info of the call that resp answers, and whether
// resp came from an idem Transport: from RoundTrip (directly, or through an
// http.Client, redirects included) or as an Outcome.Response of Resume. It
// is false for a nil resp or a response idem did not return. A
// RoundTripper between the caller and idem may wrap the response's Body but
// must keep its Request, where the Info travels (in its context).
func ResponseInfo(resp *http.Response) (Info, bool) {
	if resp == nil || resp.Request == nil {
		return Info{}, false
	}
	ci, ok := resp.Request.Context().Value(infoCtxKey{}).(*callInfo)
	if !ok || !ci.ready.Load() {
		return Info{}, false
	}
	return ci.info, true
}

// withInfo records on resp which call of o it answers, for ResponseInfo.
// The request that got resp keeps its fields; only its context gains the
// Info (and keeps what it held, such as a redirect's mark).
func withInfo(resp *http.Response, o *op) {
	ci := &o.info // no allocation of its own: it lives as long as o
	ci.info = Info{Key: o.key, Journaled: o.rec != nil}
	if o.rec != nil {
		ci.info.OperationID = o.rec.OperationID
	}
	ci.ready.Store(true)
	sent := resp.Request
	if sent != nil && sent.Context().Value(infoCtxKey{}) == ci {
		return // the attempt's own request, which carries it (attempt.go)
	}
	if sent == nil {
		sent = o.req
	}
	resp.Request = sent.WithContext(context.WithValue(sent.Context(), infoCtxKey{}, ci))
}
