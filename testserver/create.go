// create.go serves POST /payments: it applies the request's fault, checks the idempotency
// key against the key store (keys.go) and creates the payment at most once per key.

package testserver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// handleCreate serves POST /payments. The steps, in order: faults before processing; the
// key; the body (413, 400); key registration (409, 422, replay); a hold; the payment; the
// answer, possibly lost or slow.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.ledger.update(func(l *Ledger) { l.Requests++ })
	f := s.nextFault()
	if s.faultBefore(w, r, f) {
		return
	}

	key, err := parseKey(r.Header.Get(s.opts.KeyHeader))
	if err != nil {
		s.answer(w, r, f, errorResult(http.StatusBadRequest, "invalid_idempotency_key",
			s.opts.KeyHeader+" must be 1-255 printable ASCII characters, bare or as a quoted sf-string"), false)
		return
	}
	if key == "" && s.opts.RequireKey {
		s.ledger.update(func(l *Ledger) { l.MissingKey++ })
		s.answer(w, r, f, errorResult(http.StatusBadRequest, "missing_idempotency_key",
			s.opts.KeyHeader+" is required"), false)
		return
	}

	body, res := s.readBody(w, r)
	if res != nil {
		s.answer(w, r, f, res, false)
		return
	}
	p, fp, err := parsePayment(body)
	if err != nil {
		s.answer(w, r, f, errorResult(http.StatusBadRequest, "invalid_request", err.Error()), false)
		return
	}

	if key == "" {
		if f.Kind == FaultHold && !s.hold(f) {
			s.answer(w, r, Fault{}, shuttingDown(), false)
			return
		}
		s.logf("POST /payments without key, reference %q: %v", p.Reference, f)
		s.answer(w, r, f, s.create(p), false)
		return
	}

	sc := scopeOf(r, key, s.opts.Identity)
	out, e := s.keys.begin(sc, fp, s.now())
	s.logf("POST /payments key %q reference %q: %s, %v", key, p.Reference, out, f)
	switch out {
	case keyMismatch:
		s.ledger.update(func(l *Ledger) { l.Mismatches++ })
		s.answer(w, r, f, errorResult(http.StatusUnprocessableEntity, "idempotency_key_reused",
			"this idempotency key was used with a different request body"), false)
	case keyInProgress:
		s.ledger.update(func(l *Ledger) { l.InProgress++ })
		res := errorResult(http.StatusConflict, "idempotency_key_in_use",
			"a request with this idempotency key is still in progress; retry later")
		res.header.Set("Retry-After", s.opts.InProgressRetryAfter)
		s.answer(w, r, f, res, false)
	case keyReplay:
		s.ledger.update(func(l *Ledger) { l.Replays++ })
		s.answer(w, r, f, e.res, true)
	case keyRegistered:
		if f.Kind == FaultHold && !s.hold(f) {
			s.keys.abandon(sc, e)
			s.answer(w, r, Fault{}, shuttingDown(), false)
			return
		}
		res := s.create(p)
		s.keys.complete(e, res, s.now())
		s.answer(w, r, f, res, false)
	}
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
		res.write(w, false)
	case FaultDropBefore:
		abortConn(w, false)
	case FaultResetBody:
		readPart(r)
		abortConn(w, true)
	}
	return true
}

// readBody reads the whole body, up to MaxBodyBytes. On failure it returns the answer to
// give instead.
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

// create makes the payment, records its effect and returns the answer to store.
func (s *Server) create(p payment) *result {
	p = s.payments.add(p)
	s.ledger.update(func(l *Ledger) { l.Effects[p.Reference]++ })
	res := jsonResult(http.StatusCreated, p)
	res.header.Set("Location", "/payments/"+p.ID)
	return res
}

// answer sends res, unless f loses it; f may also delay it.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, f Fault, res *result, replayed bool) {
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
	res.write(w, replayed)
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
