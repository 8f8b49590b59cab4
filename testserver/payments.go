// payments.go is the business side of the fake API: the payment resource, its request body,
// and the read-only endpoints GET /payments/{id}, GET /payments?reference=
// and GET /_ledger. The idempotent POST /payments lives in create.go.

package testserver

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// payment is the resource POST /payments creates.
type payment struct {
	ID        string `json:"id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Reference string `json:"reference"`
}

// parsePayment validates body and returns the payment it asks for, without an ID: a JSON
// object whose members "amount" (a positive integer, minor units), "currency" and
// "reference" (non-empty strings) are named exactly so; other members are ignored. Names
// are matched exactly, not as encoding/json matches struct fields (case-insensitively, the
// last one winning): so the order of the members never changes the payment, and requests
// with one fingerprint (the middleware's canonical JSON sorts members and refuses duplicate
// names) ask for one payment.
func parsePayment(body []byte) (payment, error) {
	if !utf8.Valid(body) {
		return payment{}, errors.New("testserver: payment body is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var members map[string]json.RawMessage
	if err := dec.Decode(&members); err != nil {
		return payment{}, fmt.Errorf("testserver: payment body: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return payment{}, errors.New("testserver: payment body has data after the JSON value")
	}
	var p payment
	field := func(name string, v any) error {
		raw, ok := members[name]
		if !ok {
			return fmt.Errorf("testserver: %s is required", name)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("testserver: %s: %w", name, err)
		}
		return nil
	}
	err := errors.Join(field("amount", &p.Amount), field("currency", &p.Currency), field("reference", &p.Reference))
	switch {
	case err != nil:
		return payment{}, err
	case p.Amount <= 0:
		return payment{}, errors.New("testserver: amount must be a positive integer (minor units)")
	case p.Currency == "":
		return payment{}, errors.New("testserver: currency is required")
	case p.Reference == "":
		return payment{}, errors.New("testserver: reference is required")
	}
	return p, nil
}

// Payments is a registry of payments: where a Server keeps the payments it makes and
// looks them up (GET /payments, and Recover for a key stuck in progress), by ID and by the
// idempotency record (Scope.ID) that made them. It stands for a payments service's own
// database: the Servers given one Payments in Options share it, as the instances of one
// service share their database. It is safe for concurrent use.
type Payments struct {
	mu     sync.Mutex
	byID   map[string]payment
	scoped map[string]string // a payment's ID by its record's scope: an ID, not a second copy
}

// NewPayments returns an empty registry, for Options.Payments.
func NewPayments() *Payments {
	return &Payments{byID: make(map[string]payment), scoped: make(map[string]string)}
}

// add gives p a fresh ID, stores it, under scope too unless that is "", and returns it.
func (ps *Payments) add(p payment, scope string) payment {
	p.ID = "pay_" + rand.Text()[:16]
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.byID[p.ID] = p
	if scope != "" {
		ps.scoped[scope] = p.ID
	}
	return p
}

// byScope returns the payment made under the record scope.
func (ps *Payments) byScope(scope string) (payment, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	id, ok := ps.scoped[scope]
	if !ok {
		return payment{}, false
	}
	p, ok := ps.byID[id]
	return p, ok
}

// get returns the payment with id.
func (ps *Payments) get(id string) (payment, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.byID[id]
	return p, ok
}

// byReference returns the payments made for ref, ordered by ID.
func (ps *Payments) byReference(ref string) []payment {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	found := []payment{} // [] rather than null in JSON
	for _, p := range ps.byID {
		if p.Reference == ref {
			found = append(found, p)
		}
	}
	slices.SortFunc(found, func(a, b payment) int { return strings.Compare(a.ID, b.ID) })
	return found
}

// paymentList is the body of GET /payments?reference=.
type paymentList struct {
	Data []payment `json:"data"`
}

// handleListPayments serves GET /payments?reference=: the payments made for one business
// reference, how a client reconciles an operation whose outcome it lost.
func (s *Server) handleListPayments(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		errorResult(http.StatusBadRequest, "invalid_request", "the reference query parameter is required").write(w)
		return
	}
	jsonResult(http.StatusOK, paymentList{Data: s.payments.byReference(ref)}).write(w)
}

// handleGetPayment serves GET /payments/{id}.
func (s *Server) handleGetPayment(w http.ResponseWriter, r *http.Request) {
	p, ok := s.payments.get(r.PathValue("id"))
	if !ok {
		errorResult(http.StatusNotFound, "not_found", "no such payment").write(w)
		return
	}
	jsonResult(http.StatusOK, p).write(w)
}

// handleLedger serves GET /_ledger.
func (s *Server) handleLedger(w http.ResponseWriter, _ *http.Request) {
	jsonResult(http.StatusOK, s.ledger.snapshot()).write(w)
}

// routes returns the API's handler.
func (s *Server) routes() (http.Handler, error) {
	mw, err := s.newMiddleware()
	if err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	s.mw, s.idempotent = mw, mw.Wrap(http.HandlerFunc(s.handlePayment))
	if s.opts.IgnoreKeys {
		s.idempotent = http.HandlerFunc(s.handlePayment) // every request charges
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", s.handleCreate)
	mux.HandleFunc("GET /payments", s.handleListPayments)
	mux.HandleFunc("GET /payments/{id}", s.handleGetPayment)
	mux.HandleFunc("GET /_ledger", s.handleLedger)
	return mux, nil
}
