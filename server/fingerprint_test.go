package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

// The Content-Type decides how the body is read, and the reading is part of the
// fingerprint: the same bytes as JSON and as plain text are two requests, while two JSON
// spellings of one value are one.
func TestDefaultFingerprintReadsTheBodyAsItsContentTypeSays(t *testing.T) {
	fp := func(ct, body string) string {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		got, err := server.DefaultFingerprint(r, []byte(body))
		require.NoError(t, err)
		return got
	}
	body := `{"amount":100,"currency":"EUR"}`
	require.Equal(t, fp("application/json", body), fp("application/json; charset=utf-8", `{ "currency":"EUR", "amount":1e2 }`))
	require.NotEqual(t, fp("application/json", body), fp("", body), "JSON and untyped bytes")
	require.NotEqual(t, fp("application/json", body), fp("text/plain", body), "JSON and text")
	require.Equal(t, fp("", body), fp("text/plain", body), "both read as raw bytes")
}
