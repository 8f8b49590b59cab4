// policy_test.go: which answers are stored (the status policy and the handler's
// override), which header fields are, and the policy advertised to clients.

package server_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statusHandler answers ?status=N; ?store=1 or ?discard=1 override the policy.
func statusHandler(s *service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.effects.Add(1)
		q := r.URL.Query()
		if q.Get("store") != "" && !server.StoreResponse(r.Context()) {
			s.t.Error("StoreResponse: not a covered request")
		}
		if q.Get("discard") != "" && !server.DiscardResponse(r.Context()) {
			s.t.Error("DiscardResponse: not a covered request")
		}
		code, err := strconv.Atoi(q.Get("status"))
		if err != nil {
			code = http.StatusOK
		}
		http.Error(w, "answer "+q.Get("status"), code)
	})
}

func TestStorePolicy(t *testing.T) {
	s := newService(t, server.Options{}, statusHandler)
	for _, c := range []struct {
		query  string
		stored bool
	}{
		{"?status=400", true},
		{"?status=302", true},
		{"?status=500", true}, // uncertain, no Recover: stored, never run again (S40)
		{"?status=503", true},
		{"?status=429", false},
		{"?status=409", false},
		{"?status=500&store=1", true},
		{"?status=500&discard=1", false},
		{"?status=400&discard=1", false},
	} {
		t.Run(c.query, func(t *testing.T) {
			key := "k" + c.query
			before := s.effects.Load()
			first, err := s.send(t.Context(), http.MethodPost, "/payments"+c.query, key, "{}")
			require.NoError(t, err)
			again, err := s.send(t.Context(), http.MethodPost, "/payments"+c.query, key, "{}")
			require.NoError(t, err)
			assert.Equal(t, first.status, again.status)
			assert.Equal(t, c.stored, again.replayed())
			want := int64(2)
			if c.stored {
				want = 1
				assert.Equal(t, first.body, again.body)
			}
			assert.Equal(t, want, s.effects.Load()-before, "handler runs")
		})
	}
	assert.False(t, server.StoreResponse(t.Context()), "StoreResponse outside a covered request")
}

// ClassifyTransactional, for handlers whose effects roll back with their error: a 5xx
// releases the key, and the retry runs the handler again.
func TestClassifyTransactionalReleases5xx(t *testing.T) {
	s := newService(t, server.Options{Classify: server.ClassifyTransactional}, statusHandler)
	for _, q := range []string{"?status=500", "?status=503"} {
		for range 2 {
			got, err := s.send(t.Context(), http.MethodPost, "/payments"+q, "k"+q, "{}")
			require.NoError(t, err)
			assert.False(t, got.replayed())
		}
	}
	assert.EqualValues(t, 4, s.effects.Load())
	assert.Equal(t, server.OutcomeFinal, server.ClassifyTransactional(422))
	assert.Equal(t, server.OutcomeNoEffect, server.ClassifyTransactional(429))
	assert.Equal(t, server.OutcomeUncertain, server.DefaultClassify(502))
}

// Set-Cookie and hop-by-hop fields are not stored; the replay sets its own length; every
// covered answer advertises the policy, replays and problems included.
func TestStoredHeaders(t *testing.T) {
	s := newService(t, server.Options{TTL: time.Hour, Required: true}, nil)
	first := s.post("k-h", s31Body)
	require.Equal(t, "session=secret", first.header.Get("Set-Cookie"))
	again := s.post("k-h", s31Body)
	assert.True(t, again.replayed())
	assert.Empty(t, again.header.Values("Set-Cookie"), "a cookie was replayed")
	assert.Equal(t, first.header.Get("Location"), again.header.Get("Location"))
	assert.Equal(t, first.header.Get("Content-Type"), again.header.Get("Content-Type"))
	policy := `header="idempotency-key", ttl=3600, required=?1`
	for _, a := range []answer{first, again, s.post("", s31Body), s.post("k-h", `{}`)} {
		assert.Equal(t, policy, a.header.Get("Idempotency-Policy"))
	}
	p := s.post("", s31Body)
	assert.Contains(t, p.header.Get("Link"), `<`+server.DefaultPolicyURL+`>; rel="describedby"`)
}

// Stored bytes and replay latency reach the Observer.
func TestObserverStoredBytes(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	first := s.post("k-o", s31Body)
	s.post("k-o", s31Body)
	assert.Equal(t, 1, s.obs.Count("claimed"))
	assert.Equal(t, 1, s.obs.Count("replayed"))
	assert.Equal(t, []int{len(first.body)}, s.obs.StoredSizes())
}

// Fields the Connection field names are hop-by-hop and not stored either.
func TestConnectionNamedFieldsNotStored(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			w.Header().Set("Connection", "X-Hop, keep-alive")
			w.Header().Set("X-Hop", "per-connection")
			w.Header().Set("X-Kept", "kept")
			w.WriteHeader(http.StatusCreated)
		})
	})
	s.post("k", "{}")
	again := s.post("k", "{}")
	assert.True(t, again.replayed())
	assert.Equal(t, "kept", again.header.Get("X-Kept"))
	assert.Empty(t, again.header.Get("X-Hop"))
	assert.EqualValues(t, 1, s.effects.Load())
}

// A stored 204 is replayed as a 204, without a body or a Content-Length.
func TestReplayNoContent(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			w.Header().Set("X-Done", "yes")
			w.WriteHeader(http.StatusNoContent)
		})
	})
	s.post("k", "{}")
	again := s.post("k", "{}")
	assert.Equal(t, http.StatusNoContent, again.status)
	assert.True(t, again.replayed())
	assert.Equal(t, "yes", again.header.Get("X-Done"))
	assert.Empty(t, again.header.Get("Content-Length"))
	assert.Empty(t, again.body)
	assert.EqualValues(t, 1, s.effects.Load())
}

// A handler that completes its record itself (as in its own database transaction) with the
// Hold it runs under: its stored answer is the one replayed, and the middleware's refused
// completion is not a lost lease. Outside a covered request there is no Hold.
func TestHandlerCompletesInItsTransaction(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			hold, ok := server.HoldFrom(r.Context())
			if !ok || hold.Token == "" || hold.Scope.Key != "k-tx" {
				s.t.Errorf("HoldFrom = %+v, %v", hold, ok)
			}
			resp := &server.Response{Status: http.StatusCreated, Header: http.Header{"X-Tx": {"1"}}, Body: []byte("in tx")}
			if err := s.store.Complete(r.Context(), hold.Scope, hold.Token, resp, time.Hour); err != nil {
				s.t.Errorf("Complete in the handler: %v", err)
			}
			server.MarkCompleted(r.Context())
			w.Header().Set("X-Tx", "1")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("in tx"))
		})
	})
	first := s.post("k-tx", "{}")
	again := s.post("k-tx", "{}")
	assert.True(t, again.replayed())
	assert.Equal(t, first.body, again.body)
	assert.Equal(t, "1", again.header.Get("X-Tx"))
	assert.Zero(t, s.obs.Count("lease-lost"))
	assert.EqualValues(t, 1, s.effects.Load())
	_, ok := server.HoldFrom(t.Context())
	assert.False(t, ok)
	assert.False(t, server.MarkCompleted(t.Context()))
}

func TestUnstoredFieldsWithNonCanonicalNamesNotReplayed(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			w.Header()["set-cookie"] = []string{"session=secret"}
			w.Header()["connection"] = []string{"x-hop"}
			w.Header()["x-hop"] = []string{"per-connection"}
			w.Header()["x-kept"] = []string{"kept"}
			w.WriteHeader(http.StatusCreated)
		})
	})
	first := s.post("k-case", "{}")
	require.Equal(t, "session=secret", first.header.Get("Set-Cookie"), "the handler's cookie was not sent")
	again := s.post("k-case", "{}")
	assert.True(t, again.replayed())
	assert.Empty(t, again.header.Values("Set-Cookie"), "a cookie was replayed")
	assert.Empty(t, again.header.Values("X-Hop"), "a field the Connection field named was replayed")
	assert.Equal(t, "kept", again.header.Get("X-Kept"))
	assert.EqualValues(t, 1, s.effects.Load())
}
