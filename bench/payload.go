// This file holds the request bodies: the ~200-byte payment every POST sends,
// and the 1 KiB one the resume figure journals.

package main

import (
	"fmt"
	"strings"
)

// paymentBody is the JSON payment every benchmarked POST sends.
var paymentBody = []byte(`{"amount":1999,"currency":"EUR","reference":"order-4827/charge",` +
	`"description":"Monthly subscription, plan Pro, invoice INV-2026-000123",` +
	`"customer":"cus_9f8e7d6c5b4a","metadata":{"source":"bench","attempt_policy":"idem"}}`)

// resumeBody returns a JSON payment padded to exactly n bytes.
func resumeBody(n int) []byte {
	head := `{"amount":1999,"currency":"EUR","reference":"order-4827/charge","pad":"`
	tail := `"}`
	pad := max(0, n-len(head)-len(tail))
	b := []byte(head + strings.Repeat("x", pad) + tail)
	if len(b) != n {
		panic(fmt.Sprintf("resumeBody(%d) is %d bytes", n, len(b)))
	}
	return b
}
