// fingerprint_test.go: what makes two requests with one key the same request: S34, JSON
// in canonical form; the path; the Content-Type's reading of the body; a gzipped body taken
// as bytes; and a service's own Fingerprint.

package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// S34: {"amount":100,"currency":"EUR"} and { "currency" : "EUR", "amount" : 1e2 } are one
// request: replay. Amount 200 under the key: 422 as problem+json.
func TestS34CanonicalFingerprint(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	first := s.post("k-s34", `{"amount":100,"currency":"EUR"}`)
	require.Equal(t, http.StatusCreated, first.status)
	assert.False(t, first.replayed())

	same := s.post("k-s34", `{ "currency" : "EUR", "amount" : 1e2 }`)
	assert.Equal(t, http.StatusCreated, same.status)
	assert.True(t, same.replayed())
	assert.Equal(t, first.body, same.body, "the replay is not byte for byte")

	for _, body := range []string{`{"amount":100.0,"currency":"EUR"}`, "{\n\t\"amount\": 1.00E+2,\n\t\"currency\": \"\\u0045UR\"\n}"} {
		got := s.post("k-s34", body)
		assert.True(t, got.replayed(), "%s: %d %s", body, got.status, got.body)
	}

	changed := s.post("k-s34", `{"amount":200,"currency":"EUR"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, changed.status)
	assert.Equal(t, "key-reused", changed.problemType(t))
	assert.NotContains(t, string(changed.body), "k-s34", "the problem echoes the key")
	assert.EqualValues(t, 1, s.effects.Load())
	assert.Equal(t, 1, s.obs.Count("mismatch"))
	assert.Equal(t, 3, s.obs.Count("replayed"))
}

// The fingerprint covers the path: one key on two paths is two operations, each refusing
// the other's body only on its own path.
func TestFingerprintPerPath(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	a, err := s.send(t.Context(), http.MethodPost, "/payments", "k", `{"amount":1,"currency":"EUR"}`)
	require.NoError(t, err)
	b, err := s.send(t.Context(), http.MethodPost, "/refunds", "k", `{"amount":2,"currency":"EUR"}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, a.status)
	assert.Equal(t, http.StatusCreated, b.status)
	assert.False(t, b.replayed())
	assert.EqualValues(t, 2, s.effects.Load())
}

// A service-supplied Fingerprint replaces the default: here only the amount counts.
func TestCustomFingerprint(t *testing.T) {
	var calls int
	s := newService(t, server.Options{Fingerprint: func(r *http.Request, body []byte) (string, error) {
		calls++
		if len(body) == 0 {
			return "", errors.New("empty body")
		}
		return "fixed", nil
	}}, nil)
	assert.Equal(t, http.StatusCreated, s.post("k", `{"amount":1,"currency":"EUR"}`).status)
	got := s.post("k", `{"amount":2,"currency":"USD"}`)
	assert.True(t, got.replayed(), "the custom fingerprint was not used")
	bad := s.post("k2", "")
	assert.Equal(t, http.StatusBadRequest, bad.status)
	assert.Equal(t, "body-invalid", bad.problemType(t))
	assert.Equal(t, 3, calls)
	assert.EqualValues(t, 1, s.effects.Load())
}

func TestGzippedJSONBodyIsNotRefused(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			zr, err := gzip.NewReader(r.Body)
			if err == nil {
				var v map[string]any
				if err = json.NewDecoder(zr).Decode(&v); err == nil {
					s.effects.Add(1)
					w.WriteHeader(http.StatusCreated)
					return
				}
			}
			http.Error(w, "handler: "+err.Error(), http.StatusBadRequest)
		})
	})
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := io.WriteString(zw, s32Body)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	for range 2 {
		got, err := s.send(t.Context(), http.MethodPost, "/payments", "k-gzip", buf.String(), "Content-Encoding", "gzip")
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, got.status, "body %s", got.body)
	}
	assert.EqualValues(t, 1, s.effects.Load())
}
