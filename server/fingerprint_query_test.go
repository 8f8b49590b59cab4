// fingerprint_query_test.go: the query string is part of the request a key names. A key
// reused on the same path with another query is another request: 422, never the first
// request's stored answer.

package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

func TestKeyReusedWithAnotherQueryIs422(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	first, err := s.send(t.Context(), http.MethodPost, "/payments?to=alice", "k-query", s32Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.status)

	same, err := s.send(t.Context(), http.MethodPost, "/payments?to=alice", "k-query", s32Body)
	require.NoError(t, err)
	assert.True(t, same.replayed(), "the same request was not replayed")

	other, err := s.send(t.Context(), http.MethodPost, "/payments?to=bob", "k-query", s32Body)
	require.NoError(t, err)
	assert.False(t, other.replayed(), "another query got the first request's answer")
	assert.Equal(t, http.StatusUnprocessableEntity, other.status)
	assert.EqualValues(t, 1, s.effects.Load())
}

// A request without a query keeps the fingerprint it always had, so records stored before
// the query counted still match their retries.
func TestFingerprintWithoutQueryUnchanged(t *testing.T) {
	r, err := http.NewRequest(http.MethodPost, "http://x/payments", nil)
	require.NoError(t, err)
	fp, err := server.DefaultFingerprint(r, []byte("abc"))
	require.NoError(t, err)
	// hex SHA-256 of "idem-fingerprint-v1\x00POST\x00/payments\x00raw\x00abc", as before
	assert.Equal(t, "e2ca0046b053c5de3052f88f7c5d4725761062e12fc047accb77fac86a633a39", fp)
}
