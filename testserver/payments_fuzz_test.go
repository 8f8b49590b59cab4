// payments_fuzz_test.go fuzzes the agreement between the middleware's fingerprint
// (server.DefaultFingerprint, canonical JSON) and the payment parser (parsePayment in
// payments.go): invalid JSON is refused by both; a body rewritten with its members
// reordered, other white space and escapes has the same fingerprint and asks for the same
// payment (one fingerprint is one payment); a different value has another fingerprint. The
// variants come from an ordered JSON tree (jsontree_test.go) re-encoded another way.

package testserver

import (
	"encoding/json"
	"testing"
)

func FuzzOnePaymentPerFingerprint(f *testing.F) {
	f.Add([]byte(`{"amount": 5, "currency": "eur", "reference": "r", "meta": {"b": 1, "a": 2}}`), uint8(0), uint16(0))
	f.Add([]byte(`{"amount": 5, "currency": "eur", "reference": "r\ud800\ud83d\ude00\\udc00"}`), uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, body []byte, style uint8, pick uint16) {
		fp, ferr := fingerprint(body)
		p, perr := parsePayment(body)
		if len(body) > 0 && !json.Valid(body) && (ferr == nil || perr == nil) {
			t.Fatalf("invalid JSON %q accepted: fingerprint error %v, payment error %v", body, ferr, perr)
		}
		if ferr != nil {
			return // the middleware answers 400: the parser never sees it
		}
		tree, err := parseTree(body)
		if err != nil {
			if len(body) == 0 {
				return // an empty body is hashed as bytes, and refused by the parser
			}
			t.Fatalf("the fingerprint accepted %q, the token reader did not: %v", body, err)
		}

		// The same value written another way: members reordered, other white space and
		// escapes.
		for _, desc := range []bool{false, true} {
			other := tree.encode(nil, style, desc)
			ofp, err := fingerprint(other)
			if err != nil || ofp != fp {
				t.Fatalf("%q and its rewrite %q: fingerprints differ (%v)", body, other, err)
			}
			// One fingerprint is one request: the same payment, or the same refusal.
			p2, perr2 := parsePayment(other)
			if (perr == nil) != (perr2 == nil) || p != p2 {
				t.Fatalf("%q and %q share a fingerprint but ask for %+v (%v) and %+v (%v)", body, other, p, perr, p2, perr2)
			}
		}

		// A different value: one live leaf or key changed.
		if mutated, ok := tree.mutate(int(pick)); ok {
			other := mutated.encode(nil, style, false)
			if ofp, err := fingerprint(other); err == nil && ofp == fp {
				t.Fatalf("%q and %q are different values with one fingerprint", body, other)
			}
		}
	})
}
