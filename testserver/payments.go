// payments.go is the business side of the fake API: the payment resource, its request body
// and fingerprint, and the read-only endpoints GET /payments/{id}, GET /payments?reference=
// and GET /_ledger. The idempotent POST /payments lives in create.go.

package testserver

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
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

// paymentRequest is the body of POST /payments; pointers tell a missing field from a zero.
type paymentRequest struct {
	Amount    *int64  `json:"amount"`
	Currency  *string `json:"currency"`
	Reference *string `json:"reference"`
}

// parsePayment validates body and returns the payment it asks for, without an ID, and the
// body's fingerprint.
func parsePayment(body []byte) (payment, [sha256.Size]byte, error) {
	canon, err := canonicalJSON(body)
	if err != nil {
		return payment{}, [sha256.Size]byte{}, err
	}
	// Decoded from the canonical form, so one fingerprint is one payment: encoding/json
	// matches names case-insensitively and lets the last duplicate win, so {"amount": 5,
	// "Amount": 6} read as written would ask for another amount than its reordering.
	var req paymentRequest
	if err := json.Unmarshal(canon, &req); err != nil {
		return payment{}, [sha256.Size]byte{}, fmt.Errorf("testserver: payment body: %w", err)
	}
	switch {
	case req.Amount == nil || *req.Amount <= 0:
		err = errors.New("testserver: amount must be a positive integer (minor units)")
	case req.Currency == nil || *req.Currency == "":
		err = errors.New("testserver: currency is required")
	case req.Reference == nil || *req.Reference == "":
		err = errors.New("testserver: reference is required")
	}
	if err != nil {
		return payment{}, [sha256.Size]byte{}, err
	}
	p := payment{Amount: *req.Amount, Currency: *req.Currency, Reference: *req.Reference}
	return p, sha256.Sum256(canon), nil
}

// canonicalJSON re-encodes the single JSON value in body with object keys sorted (as
// encoding/json does for maps) and numbers kept verbatim, so that key order and white space
// do not change a fingerprint. A body that is not UTF-8 is refused (RFC 8259 section 8.1),
// and so is one with a lone UTF-16 surrogate escape (section 8.2): encoding/json would turn
// each invalid byte, and each lone surrogate, into U+FFFD, so different bodies would share
// a fingerprint.
func canonicalJSON(body []byte) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, errors.New("testserver: payment body is not UTF-8")
	}
	if loneSurrogate(body) {
		// RFC 8259 section 8.2: such a string names no Unicode characters.
		// encoding/json decodes every one to U+FFFD, so "\ud800" and
		// "\udbff" would share a fingerprint.
		return nil, errors.New("testserver: payment body has a lone UTF-16 surrogate escape")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("testserver: payment body is not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("testserver: payment body has data after the JSON value")
	}
	return json.Marshal(v)
}

// loneSurrogate reports whether body holds a \u escape of a UTF-16 surrogate
// that is not a high one followed at once by an escaped low one. Outside
// strings a backslash is not JSON at all, so the body is scanned whole.
func loneSurrogate(body []byte) bool {
	escape := func(i int) (rune, bool) { // the \uXXXX at body[i:], if any
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		if !ok {
			i++ // an escape of one character: \\, \", \n, ...
			continue
		}
		switch {
		case 0xdc00 <= r && r <= 0xdfff:
			return true // a low one with no high one before it
		case 0xd800 <= r && r <= 0xdbff:
			low, ok := escape(i + 6)
			if !ok || low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 6 // the pair
		}
		i += 5
	}
	return false
}

// paymentStore holds created payments by ID. It is safe for concurrent use.
type paymentStore struct {
	mu   sync.Mutex
	byID map[string]payment
}

func newPaymentStore() *paymentStore {
	return &paymentStore{byID: make(map[string]payment)}
}

// add gives p a fresh ID, stores it and returns it.
func (ps *paymentStore) add(p payment) payment {
	p.ID = "pay_" + rand.Text()[:16]
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.byID[p.ID] = p
	return p
}

// get returns the payment with id.
func (ps *paymentStore) get(id string) (payment, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.byID[id]
	return p, ok
}

// byReference returns the payments made for ref, ordered by ID.
func (ps *paymentStore) byReference(ref string) []payment {
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
		errorResult(http.StatusBadRequest, "invalid_request", "the reference query parameter is required").write(w, false)
		return
	}
	jsonResult(http.StatusOK, paymentList{Data: s.payments.byReference(ref)}).write(w, false)
}

// handleGetPayment serves GET /payments/{id}.
func (s *Server) handleGetPayment(w http.ResponseWriter, r *http.Request) {
	p, ok := s.payments.get(r.PathValue("id"))
	if !ok {
		errorResult(http.StatusNotFound, "not_found", "no such payment").write(w, false)
		return
	}
	jsonResult(http.StatusOK, p).write(w, false)
}

// handleLedger serves GET /_ledger.
func (s *Server) handleLedger(w http.ResponseWriter, _ *http.Request) {
	jsonResult(http.StatusOK, s.ledger.snapshot()).write(w, false)
}

// routes returns the API's handler.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", s.handleCreate)
	mux.HandleFunc("GET /payments", s.handleListPayments)
	mux.HandleFunc("GET /payments/{id}", s.handleGetPayment)
	mux.HandleFunc("GET /_ledger", s.handleLedger)
	return mux
}
