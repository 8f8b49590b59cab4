// payments_fuzz_test.go fuzzes the request fingerprint (canonicalJSON and parsePayment in
// payments.go): it never panics; invalid JSON is an error; key order, white space and string
// escapes do not change it; a different value changes it; one fingerprint is one payment.
// The variants come from an ordered JSON tree (jsontree_test.go) re-encoded another way.

package testserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func FuzzCanonicalJSON(f *testing.F) {
	f.Add([]byte(`{"amount": 5, "currency": "eur", "reference": "r", "meta": {"b": 1, "a": 2}}`), uint8(0), uint16(0))
	f.Add([]byte(`{"amount": 5, "currency": "eur", "reference": "r\ud800\ud83d\ude00\\udc00"}`), uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, body []byte, style uint8, pick uint16) {
		canon, err := canonicalJSON(body)
		p, fp, perr := parsePayment(body)
		if !json.Valid(body) && (err == nil || perr == nil) {
			t.Fatalf("invalid JSON %q accepted: canonical %q, payment error %v", body, canon, perr)
		}
		if err != nil {
			if perr == nil {
				t.Fatalf("parsePayment accepted %q, whose canonical form failed: %v", body, err)
			}
			return
		}
		if perr == nil && fp != sha256.Sum256(canon) {
			t.Fatalf("fingerprint of %q is not the SHA-256 of its canonical form %q", body, canon)
		}
		if again, err := canonicalJSON(canon); err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("canonical form %q is not canonical: %q, %v", canon, again, err)
		}
		tree, err := parseTree(body)
		if err != nil {
			t.Fatalf("canonicalJSON accepted %q, the token reader did not: %v", body, err)
		}

		// The same value written another way: members reordered (duplicates keep their
		// order, so the last still wins), other white space and escapes.
		for _, desc := range []bool{false, true} {
			other := tree.encode(nil, style, desc)
			oc, err := canonicalJSON(other)
			if err != nil || !bytes.Equal(oc, canon) {
				t.Fatalf("%q and its rewrite %q: canonical %q and %q (%v)", body, other, canon, oc, err)
			}
			// One fingerprint is one request: the same payment, or the same refusal.
			p2, _, perr2 := parsePayment(other)
			if (perr == nil) != (perr2 == nil) || p != p2 {
				t.Fatalf("%q and %q share a fingerprint but ask for %+v (%v) and %+v (%v)", body, other, p, perr, p2, perr2)
			}
		}

		// A different value: one live leaf or key changed.
		if mutated, ok := tree.mutate(int(pick)); ok {
			other := mutated.encode(nil, style, false)
			if oc, err := canonicalJSON(other); err == nil && bytes.Equal(oc, canon) {
				t.Fatalf("%q and %q are different values with one canonical form %q", body, other, canon)
			}
		}

		// Different bytes inside a string: one invalid UTF-8 byte swapped for another.
		if i := firstInvalidUTF8(body); i >= 0 {
			other := bytes.Clone(body)
			other[i] = 0xff
			if body[i] == 0xff {
				other[i] = 0xfe
			}
			if oc, err := canonicalJSON(other); err == nil && bytes.Equal(oc, canon) {
				t.Fatalf("%q and %q differ in one byte but share the canonical form %q", body, other, canon)
			}
		}
	})
}

// firstInvalidUTF8 returns the index of the first byte of b that is not part of a valid
// UTF-8 sequence, or -1.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}
