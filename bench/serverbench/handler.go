// This file holds the bare handler every row serves, alone or wrapped: a
// payments endpoint that decodes the JSON payment and answers 201 with the
// new payment's ID, and the ~220-byte body the load generator posts to it.

package serverbench

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
)

// paymentBody is the JSON payment every request posts: the client bench's.
var paymentBody = []byte(`{"amount":1999,"currency":"EUR","reference":"order-4827/charge",` +
	`"description":"Monthly subscription, plan Pro, invoice INV-2026-000123",` +
	`"customer":"cus_9f8e7d6c5b4a","metadata":{"source":"bench","attempt_policy":"idem"}}`)

// payment is what the handler decodes.
type payment struct {
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Reference   string `json:"reference"`
	Description string `json:"description"`
	Customer    string `json:"customer"`
	Metadata    struct {
		Source        string `json:"source"`
		AttemptPolicy string `json:"attempt_policy"`
	} `json:"metadata"`
}

// payments numbers the payments the child creates, across rows.
var payments atomic.Uint64

// bare is the handler: 400 for a body that is not a payment, otherwise
// 201 {"id":"pay_N"}. It is safe for concurrent use.
type bare struct{}

func (bare) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p payment
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.Amount <= 0 || p.Currency == "" {
		http.Error(w, "not a payment", http.StatusBadRequest)
		return
	}
	b := make([]byte, 0, 32)
	b = append(b, `{"id":"pay_`...)
	b = strconv.AppendUint(b, payments.Add(1), 10)
	b = append(b, `"}`...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(b)
}
