// fingerprint_test.go holds the regression tests for what FuzzOnePaymentPerFingerprint (then
// FuzzCanonicalJSON, over testserver's own canonical JSON, since replaced by package
// server's) found: the fingerprint and the payment a body asks for must agree.

package testserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/require"
)

// fingerprint returns the middleware's fingerprint of a POST /payments with a JSON body.
func fingerprint(body []byte) (string, error) {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	return server.DefaultFingerprint(r, body)
}

// Found by FuzzCanonicalJSON (testdata/fuzz/FuzzOnePaymentPerFingerprint/invalid-utf8-collision):
// encoding/json turns invalid UTF-8 into U+FFFD, so bodies that differ only in such bytes
// shared a fingerprint, and a reused key replayed instead of answering 422. Such a body is
// not JSON (RFC 8259 section 8.1): the middleware answers 400 and stores nothing, and the
// payment parser refuses it too (for a request without a key).
func TestFingerprintRefusesInvalidUTF8(t *testing.T) {
	_, err := parsePayment([]byte(`{"amount": 1, "currency": "eur", "reference": "r` + "\xff" + `"}`))
	require.Error(t, err)

	s := newTestServer(t, nil)
	for _, ref := range []string{"r\xff", "r\xfe", "r\xc3"} {
		a := post(t, s, "k", `{"amount": 1, "currency": "eur", "reference": "`+ref+`"}`)
		require.Equal(t, http.StatusBadRequest, a.status, "reference %q: %s", ref, a.body)
		require.Equal(t, "body-invalid", problemType(t, a))
	}
	require.Equal(t, http.StatusBadRequest, post(t, s, "", `{"amount": 1, "currency": "eur", "reference": "r`+"\xff"+`"}`).status)
	require.Empty(t, s.Ledger().Effects)
	require.Equal(t, http.StatusCreated, post(t, s, "k", payBody("r\u00e9", 1)).status, "valid UTF-8 still works")
}

// Found by FuzzCanonicalJSON (seed case-variant-keys): encoding/json matches member names
// case-insensitively, the last one winning, so a body and its reordering had one
// fingerprint but asked for different payments. Members are now matched by exact name:
// one fingerprint, one payment.
func TestFingerprintIsOnePayment(t *testing.T) {
	bodies := []string{
		`{"amount": 5, "Amount": 6, "currency": "eur", "reference": "r", "Reference": "s"}`,
		`{"Reference": "s", "Amount": 6, "reference": "r", "currency": "eur", "amount": 5}`,
	}
	p0, err0 := parsePayment([]byte(bodies[0]))
	p1, err1 := parsePayment([]byte(bodies[1]))
	require.NoError(t, err0)
	require.NoError(t, err1)
	require.Equal(t, p0, p1)
	require.Equal(t, payment{Amount: 5, Currency: "eur", Reference: "r"}, p0)
	fp0, err0 := fingerprint([]byte(bodies[0]))
	fp1, err1 := fingerprint([]byte(bodies[1]))
	require.NoError(t, err0)
	require.NoError(t, err1)
	require.Equal(t, fp0, fp1)

	// Over HTTP: under one key the second body replays the first's payment, and that is
	// exactly the payment the second body asks for on a key of its own.
	s := newTestServer(t, nil)
	first := decodePayment(t, post(t, s, "k1", bodies[0]))
	a := post(t, s, "k1", bodies[1])
	require.Equal(t, "true", a.header.Get(replayedHeader))
	own := decodePayment(t, post(t, s, "k2", bodies[1]))
	require.Equal(t, first.Amount, own.Amount)
	require.Equal(t, first.Reference, own.Reference)
}

// Noticed in an earlier review, not by the fuzzer: encoding/json decodes every lone UTF-16
// surrogate escape to U+FFFD, so "\ud800" and "\udbff" shared a fingerprint and a reused
// key replayed where it should have answered 422. Such a string names no Unicode characters
// (RFC 8259 section 8.2): the middleware answers 400 and stores nothing. Escaped pairs are
// still taken.
func TestFingerprintRefusesLoneSurrogates(t *testing.T) {
	s := newTestServer(t, nil)
	for _, ref := range []string{`r\ud800`, `r\udbff`, `\ude00\ud83d`} {
		a := post(t, s, "k", `{"amount": 1, "currency": "eur", "reference": "`+ref+`"}`)
		require.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
		require.Equal(t, "body-invalid", problemType(t, a))
	}
	require.Empty(t, s.Ledger().Effects)
	require.Equal(t, http.StatusCreated, post(t, s, "k", `{"amount": 1, "currency": "eur", "reference": "r\ud83d\ude00"}`).status)
}
