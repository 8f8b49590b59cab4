// claim.go claims a request's key in the Store, or answers the request from the record it
// finds: 422 for another fingerprint, the replay when done, 409 (or a bounded wait) while
// in progress, recovery (recover.go) when stuck, 503 when the Store is down. The claim's
// token is minted here, so a claim whose reply was lost is repeated and recognised.

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Polling while Options.Wait runs: the first poll after minPoll, doubling up to maxPoll.
const (
	minPoll = 10 * time.Millisecond
	maxPoll = 250 * time.Millisecond
)

// claimTries is how many times one claim is sent with its token before the middleware
// gives up and answers 503: a repeat recognises its own earlier success, so a lost reply
// costs a round trip, not the key.
const claimTries = 3

// claimed is a claim the handler is to run under: its token and the time the call that
// may have made it was sent (its lease cannot end before that time + Lease).
type claimed struct {
	token string
	sent  time.Time
}

// claim returns the claim under which the handler is to run, or false when it has answered
// w itself.
func (m *Middleware) claim(w http.ResponseWriter, r *http.Request, rq *request) (claimed, bool) {
	c := m.cfg
	// The Store is called without the request's cancellation: a claim that a client's
	// disconnection cut off after the Store made it would leave a record nobody runs.
	ctx := rq.ctx
	deadline := rq.start.Add(c.Wait)
	poll := minPoll
	token := NewToken()
	// For a settling on this instance: a note waited on once, so that a new holder is not
	// waited on; a claim again once, when a settling ended meanwhile.
	waited, rechecked := false, false
	for {
		mark := m.finishing.mark()
		cl, sent, err := m.sendClaim(ctx, r, rq, token)
		if err != nil {
			// The claim may have landed: release it once the Store answers again, so the
			// key is not left held by a handler that never ran.
			m.repeat(r, "claim", ResolvedReleased, sent.Add(c.TTL), func(ctx context.Context) error {
				return c.Store.Release(ctx, rq.scope, token)
			}, settling{})
			m.unavailable(w, r, err)
			return claimed{}, false
		}
		if cl.Claimed {
			c.Observer.Claimed(r)
			return claimed{token: token, sent: sent}, true
		}
		rec := cl.Record
		switch {
		case rec.Fingerprint != rq.fp:
			// Checked first: a reused key learns nothing of the record's state.
			c.Observer.Mismatch(r)
			c.writeProblem(w, http.StatusUnprocessableEntity, ProblemKeyReused, "Idempotency key reused",
				"This idempotency key was already used for a different request; use a new key for a new request.", 0)
			return claimed{}, false
		case rec.State == StateDone && rec.Response == nil:
			m.unavailable(w, r, errors.New("server: the Store returned a done record without a response"))
			return claimed{}, false
		case rec.State == StateDone:
			m.replay(w, r, rq, rec.Response)
			return claimed{}, false
		case rec.LeaseLeft <= 0:
			return m.recoverStuck(w, r, rq, rec)
		}
		if !waited {
			switch m.finishing.wait(r.Context(), rq.scope, c.StoreTimeout, mark) {
			case waitedSettled:
				waited = true
				continue // its handler had returned here: its record is settled now
			case maybeSettled:
				if !rechecked {
					rechecked = true
					continue // its record may have been settled here since the claim
				}
			}
		}
		wait := min(poll, rec.LeaseLeft, time.Until(deadline))
		if wait <= 0 {
			c.Observer.Conflict(r, false)
			c.writeProblem(w, http.StatusConflict, ProblemInProgress, "A request with this key is in progress",
				"Another request with this idempotency key is being processed; retry after it finishes.",
				m.durations.retryAfter(r, rec.LeaseLeft))
			return claimed{}, false
		}
		t := time.NewTimer(wait)
		select {
		case <-r.Context().Done():
			t.Stop()
			return claimed{}, false // the client left: there is no one to answer
		case <-t.C:
		}
		poll = min(2*poll, maxPoll)
	}
}

// sendClaim sends the claim under token up to claimTries times, each bounded by
// StoreTimeout, until the Store answers. It returns the answer and when the first call
// that may have made it was sent; or the last error, when none was answered.
func (m *Middleware) sendClaim(ctx context.Context, r *http.Request, rq *request, token string) (Claim, time.Time, error) {
	c := m.cfg
	var first time.Time
	var err error
	for try := range claimTries {
		sent := m.leaseConfig.Clock.Now() // the time its keeper counts the lease from
		if first.IsZero() {
			first = sent
		}
		var cl Claim
		err = m.call(ctx, func(ctx context.Context) error {
			cl, err = c.Store.Claim(ctx, rq.scope, token, rq.fp, c.Lease, c.TTL)
			return err
		})
		if err == nil {
			if try > 0 {
				c.Observer.StoreResolved(r, "claim", ResolvedLanded)
			}
			return cl, first, nil
		}
		if try == 0 {
			c.Observer.StoreUncertain(r, "claim", err)
		}
	}
	return Claim{}, first, err
}

// replay answers w with resp, a stored response, byte for byte, marked as a replay; or,
// for a response that was not kept, with a problem saying so.
func (m *Middleware) replay(w http.ResponseWriter, r *http.Request, rq *request, resp *Response) {
	c := m.cfg
	if resp.Unreplayable != "" {
		c.writeProblem(w, http.StatusUnprocessableEntity, ProblemNotReplayable, "Response not replayable",
			"The request with this idempotency key was processed, but its response ("+resp.Unreplayable+
				") was not kept for replay; look its result up instead of retrying.", 0,
			func(p *problem) { p.OriginalStatus = resp.Status })
		c.Observer.Replayed(r, time.Since(rq.start))
		return
	}
	if !finalStatus(resp.Status) {
		m.unavailable(w, r, fmt.Errorf("server: the Store returned a response with status %d", resp.Status))
		return
	}
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = append([]string(nil), vs...)
	}
	if bodyAllowed(resp.Status) {
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	}
	h.Set(replayedHeader, "true")
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body) // a client gone away is not the server's problem
	c.Observer.Replayed(r, time.Since(rq.start))
}

// finalStatus reports whether status can be a stored answer's: a final status net/http
// writes (RFC 9110 section 15: three digits, not informational).
func finalStatus(status int) bool { return status >= 200 && status <= 999 }

// bodyAllowed reports whether a response with status may carry a body and so a
// Content-Length (RFC 9110 sections 8.6, 15.3.5 and 15.4.5).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// replayedHeader marks a replayed answer, as Stripe does.
const replayedHeader = "Idempotent-Replayed"

// unavailable answers 503 for a Store error: the handler does not run when the claim
// cannot be made (fail closed), and a retry after the outage works normally.
func (m *Middleware) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	c := m.cfg
	c.Logger.Error("idempotency: store unavailable; failing closed", "err", err)
	c.Observer.StoreError(r, err)
	c.writeProblem(w, http.StatusServiceUnavailable, ProblemUnavailable, "Idempotency store unavailable",
		"The request was not processed; retry later with the same idempotency key.", time.Second)
}
