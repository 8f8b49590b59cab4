// recover.go is the recovery of a record stuck in progress: its holder's lease lapsed (the
// process crashed, or stalled past its lease) and nobody knows whether the effect
// happened. The record is never re-run blindly (seed article 2, step 5): Options.Recover
// decides.

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// RecoverInfo describes a stuck record to Options.Recover. It belongs to the one call it
// is passed to.
type RecoverInfo struct {
	// Request is the copy that found the record stuck; its Body reads Body again.
	Request *http.Request
	// Body is the request's body, in full.
	Body []byte
	// Scope names the record (its Identity is the hash the Store holds).
	Scope Scope
	// Fingerprint is the request's, which the record's matches.
	Fingerprint string
}

// Recovery is what Options.Recover decided; a plain value, not modified once returned. The zero Recovery means "cannot tell yet": the
// copy gets 409, and the next copy after a lease asks again.
type Recovery struct {
	// Response, if not nil, is the answer to the operation (e.g. built from the payment
	// found by its business reference): it is stored and replayed, now and to later copies.
	Response *Response
	// Rerun, if Response is nil, says the effect surely did not happen: the handler runs
	// again for this copy, under a new lease.
	Rerun bool
}

// String names what r decided, for logs.
func (r Recovery) String() string {
	switch {
	case r.Response != nil:
		return fmt.Sprintf("replay %d", r.Response.Status)
	case r.Rerun:
		return "rerun"
	}
	return "undecided"
}

// recoverStuck handles a copy that found its record stuck, held under stale. It returns
// the claim the handler is to run under; otherwise it has answered w.
func (m *Middleware) recoverStuck(w http.ResponseWriter, r *http.Request, rq *request, rec Record) (claimed, bool) {
	c := m.cfg
	if c.Recover == nil {
		m.stuck(w, r, rec)
		return claimed{}, false
	}
	ctx := rq.ctx
	token, sent := NewToken(), time.Now()
	err := m.call(ctx, func(ctx context.Context) error {
		return c.Store.TakeOver(ctx, rq.scope, rec.Token, token, c.Lease)
	})
	if m.answerLeaseErr(w, r, err) { // lost: another copy took it over, or the holder woke up
		// A take-over whose reply was lost may have landed: its lease lapses unrenewed,
		// and the next copy recovers the record again, as from a crashed holder.
		return claimed{}, false
	}
	hr := r.WithContext(r.Context()) // the hook's copy, with a body it can read again
	hr.Body = rq.bodyReader()
	got, err := c.Recover(r.Context(), RecoverInfo{Request: hr, Body: rq.body, Scope: rq.scope, Fingerprint: rq.fp})
	if err == nil && got.Response != nil && !finalStatus(got.Response.Status) {
		err = fmt.Errorf("server: Recover answered status %d, not a final status (200-999)", got.Response.Status)
	}
	if err != nil {
		c.Logger.Error("idempotency: Recover failed; the record stays stuck", "err", err)
		got = Recovery{}
	}
	c.Logger.Info("idempotency: recovered a stuck record", "decision", got.String())
	c.Observer.Recovered(r, got)
	switch {
	case got.Response != nil:
		resp := cloneResponse(got.Response)
		err := m.settle(rq.ctx, r, "complete", sent.Add(c.TTL), func(ctx context.Context) error {
			return c.Store.Complete(ctx, rq.scope, token, resp, c.TTL)
		}, settling{})
		if errors.Is(err, ErrLeaseLost) {
			// Another copy took the record over while the hook ran: its answer is the one.
			m.answerLeaseErr(w, r, err)
			return claimed{}, false
		}
		m.replay(w, r, rq, resp)
		return claimed{}, false
	case got.Rerun:
		// No heartbeat ran while the hook did: if it outlived our lease, another copy may
		// have taken the record over (and run the handler) meanwhile. Renewing is the fence.
		sent = time.Now()
		err := m.call(ctx, func(ctx context.Context) error { return c.Store.Renew(ctx, rq.scope, token, c.Lease) })
		if m.answerLeaseErr(w, r, err) {
			return claimed{}, false
		}
		return claimed{token: token, sent: sent}, true
	}
	// Undecided: our lease lapses in its turn and the next copy asks again.
	c.Observer.Conflict(r, true)
	c.writeProblem(w, http.StatusConflict, ProblemStuck, "The request with this key did not finish",
		"The request with this idempotency key was interrupted and its outcome is being established; retry later.", c.Lease)
	return claimed{}, false
}

// answerLeaseErr answers w for err, the error of taking over or renewing a
// lease, and reports whether it did: ErrLeaseLost means another copy holds
// the record, in progress again (409); any other error, an unavailable store.
func (m *Middleware) answerLeaseErr(w http.ResponseWriter, r *http.Request, err error) bool {
	c := m.cfg
	switch {
	case errors.Is(err, ErrLeaseLost):
		c.Observer.Conflict(r, false)
		c.writeProblem(w, http.StatusConflict, ProblemInProgress, "A request with this key is in progress",
			"Another request with this idempotency key is being processed; retry later.", c.Lease)
		return true
	case err != nil:
		m.unavailable(w, r, err)
		return true
	}
	return false
}

// stuck answers a copy that found its record stuck when there is no recovery: 409 until
// the record expires, with that as Retry-After.
func (m *Middleware) stuck(w http.ResponseWriter, r *http.Request, rec Record) {
	m.cfg.Observer.Conflict(r, true)
	m.cfg.writeProblem(w, http.StatusConflict, ProblemStuck, "The request with this key did not finish",
		"The request with this idempotency key was interrupted and its outcome is unknown; the key cannot be used until it expires.",
		rec.ExpiresIn)
}

func cloneResponse(r *Response) *Response {
	c := *r
	c.Header = r.Header.Clone()
	c.Body = append([]byte(nil), r.Body...)
	return &c
}
