// create.go serves POST /payments in two layers. handleCreate, outside the idempotency
// middleware (idempotency.go), counts the request, draws its fault, carries out the faults
// that act before processing, and delivers, loses or delays whatever answer comes back.
// handlePayment, inside the middleware, validates the body, holds, and creates the payment.

package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/idem-go/idem/server"
)

// handleCreate serves POST /payments. The steps, in order: faults before processing; the
// middleware (key, body size, fingerprint, claim, 409, 422, replay) around handlePayment;
// the answer, possibly lost or slow.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.ledger.update(func(l *Ledger) { l.Requests++ })
	f := s.nextFault()
	if s.faultBefore(w, r, f) {
		return
	}
	if s.opts.RequireKey && !s.opts.IgnoreKeys && len(r.Header.Values(s.opts.KeyHeader)) == 0 {
		s.ledger.update(func(l *Ledger) { l.MissingKey++ }) // the middleware answers 400
	}
	ex := &exchange{fault: f, key: r.Header.Get(s.opts.KeyHeader),
		body: &captured{r: r.Body, limit: s.opts.MaxBodyBytes + 1}}
	r2 := r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex))
	r2.Body = ex.body
	// The answer is kept whole, so that a lost or slow fault acts on it after the
	// middleware has stored it, as on a server that charged, stored, then lost the reply.
	buf := &buffered{header: http.Header{}}
	s.idempotent.ServeHTTP(buf, r2)
	if buf.isProblem(http.StatusServiceUnavailable, server.ProblemUnavailable) {
		s.ledger.update(func(l *Ledger) { l.StoreUnavailable++ })
	}
	switch f.Kind {
	case FaultLostResponse:
		s.ledger.fault(f)
		abortConn(w, true)
		return
	case FaultSlowResponse:
		s.ledger.fault(f)
		if !s.waitSlow(r.Context(), f.delay()) {
			return
		}
	}
	buf.writeTo(w)
}

// handlePayment creates the payment, behind the middleware: for a request with a key it
// runs once per key, holding the key's claim. An answer refused before any effect (a bad
// body, a hold cut short by Close, a context the middleware ended) is discarded, so the
// key is free again, as Stripe does for a request that failed validation.
func (s *Server) handlePayment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ex := exchangeFrom(ctx)
	hold, keyed := server.HoldFrom(ctx)
	if keyed {
		id := hold.Scope.ID()
		s.track.start(ex, id)
		defer s.track.end(id)
	}
	refuse := func(res *result) {
		server.DiscardResponse(ctx)
		res.write(w)
	}
	body, res := s.readBody(w, r)
	if res != nil {
		refuse(res)
		return
	}
	p, err := parsePayment(body)
	if err != nil {
		refuse(errorResult(http.StatusBadRequest, "invalid_request", err.Error()))
		return
	}
	if !keyed && !s.opts.IgnoreKeys {
		s.logf("POST /payments without key, reference %q: %v", p.Reference, ex.fault)
	}
	if ex.fault.Kind == FaultHold && !s.hold(ex.fault) {
		refuse(shuttingDown())
		return
	}
	if cause := stopped(ctx); cause != nil {
		refuse(errorResult(http.StatusServiceUnavailable, "not_charged", "the payment was not made: "+cause.Error()))
		return
	}
	scope := ""
	if keyed {
		scope = hold.Scope.ID()
	}
	s.create(p, scope).write(w)
}

// stopped returns why ctx ended, unless it did not, or only because the client went away.
// The middleware may end a handler's context when it can no longer confirm the key's lease,
// before another server can take the key over: a payment made after that could be made
// twice, so the handler makes none. The middleware does not pass a client's going away on;
// without it (a request without a key, or IgnoreKeys) net/http ends the context then, with
// context.Canceled as the cause: that does not stop a payment, as a real server would not
// notice it either (a hold runs to its end, then pays).
func stopped(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
	}
	return nil
}

// nextFault returns the next scripted fault, else one drawn from the plan.
func (s *Server) nextFault() Fault {
	s.mu.Lock()
	if len(s.script) > 0 {
		f := s.script[0]
		s.script = s.script[1:]
		s.mu.Unlock()
		return f
	}
	s.mu.Unlock()
	return s.opts.Plan.Draw()
}

// faultBefore carries out a fault that acts before processing and reports whether it did.
// The fault is counted first: the client may look at the ledger as soon as it sees the fault.
func (s *Server) faultBefore(w http.ResponseWriter, r *http.Request, f Fault) bool {
	if f.Kind != FaultStatus && f.Kind != FaultDropBefore && f.Kind != FaultResetBody {
		return false
	}
	s.ledger.fault(f)
	s.logf("POST /payments key %q: %v before processing", r.Header.Get(s.opts.KeyHeader), f)
	switch f.Kind {
	case FaultStatus:
		res := errorResult(f.status(), "fault_injected", "injected fault: "+f.String())
		if ra := f.retryAfter(s.now()); ra != "" {
			res.header.Set("Retry-After", ra)
		}
		res.write(w)
	case FaultDropBefore:
		abortConn(w, false)
	case FaultResetBody:
		readPart(r)
		abortConn(w, true)
	}
	return true
}

// readBody reads the whole body, up to MaxBodyBytes (the middleware has bounded a keyed
// request's already). On failure it returns the answer to give instead.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *result) {
	if r.ContentLength > s.opts.MaxBodyBytes {
		return nil, tooLarge(s.opts.MaxBodyBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooLarge(s.opts.MaxBodyBytes)
		}
		return nil, errorResult(http.StatusBadRequest, "invalid_request", "reading the body failed")
	}
	return body, nil
}

// hold carries out FaultHold and reports whether processing may go on.
func (s *Server) hold(f Fault) bool {
	s.ledger.fault(Fault{Kind: FaultHold})
	return s.waitHold(f.delay())
}

// create makes the payment under the record scope ("" without a key), records its effect
// and returns the answer.
func (s *Server) create(p payment, scope string) *result {
	p = s.payments.add(p, scope)
	s.ledger.update(func(l *Ledger) { l.Effects[p.Reference]++ })
	return paymentResult(p)
}

// paymentResult is the answer to the request that created p: 201, the payment, its
// Location. Recover rebuilds it byte for byte from the payment.
func paymentResult(p payment) *result {
	res := jsonResult(http.StatusCreated, p)
	res.header.Set("Location", "/payments/"+p.ID)
	return res
}

func tooLarge(limit int64) *result {
	return errorResult(http.StatusRequestEntityTooLarge, "body_too_large",
		fmt.Sprintf("the body is larger than %d bytes", limit))
}

func shuttingDown() *result {
	res := errorResult(http.StatusServiceUnavailable, "shutting_down", "the server is closing")
	res.header.Set("Connection", "close")
	return res
}
