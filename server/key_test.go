// key_test.go: the idempotency key as the middleware reads it and the scope it is held
// under (identity, method, path): quoted or bare, one per request, one operation per path
// however it is spelt, and S33, a key scoped to its identity.

package server_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The key is accepted bare or as an RFC 8941 sf-string; both spell one key.
func TestKeyQuotedOrBare(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	assert.False(t, s.post("8e03978e-40d5", s31Body).replayed())
	assert.True(t, s.post(`"8e03978e-40d5"`, s31Body).replayed())
	assert.False(t, s.post(`"quo\"te"`, s31Body).replayed())
	assert.True(t, s.post(`quo"te`, s31Body).replayed())
	assert.EqualValues(t, 2, s.effects.Load())
}

// Two Idempotency-Key fields are refused (draft section 2.1).
func TestTwoKeysRefused(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	got, err := s.send(t.Context(), http.MethodPost, "/payments", "k1", s31Body, "Idempotency-Key", "k2")
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, got.status)
	assert.EqualValues(t, 0, s.effects.Load())
}

func TestKeyOnPercentEncodedPathIsOneOperation(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	first, err := s.send(t.Context(), http.MethodPost, "/%70ayments", "k-path", s32Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.status)
	for _, p := range []string{"/payments", "/%70aym%65nts", "/%70ayments"} {
		again, err := s.send(t.Context(), http.MethodPost, p, "k-path", s32Body)
		require.NoError(t, err)
		assert.True(t, again.replayed(), "%s: the handler ran again (status %d)", p, again.status)
	}
	assert.EqualValues(t, 1, s.effects.Load())

	// A reserved character stays encoded: /a%2Fb is not /a/b.
	one, err := s.send(t.Context(), http.MethodPost, "/a%2Fb", "k-reserved", s32Body)
	require.NoError(t, err)
	two, err := s.send(t.Context(), http.MethodPost, "/a/b", "k-reserved", s32Body)
	require.NoError(t, err)
	assert.False(t, one.replayed() || two.replayed(), "two paths shared one record")
}

// tenant is an Identity from the X-Tenant header; a request without one is refused.
func tenant(r *http.Request) (string, error) {
	if v := r.Header.Get("X-Tenant"); v != "" {
		return v, nil
	}
	return "", errors.New("no tenant")
}

// The same key from users A and B: B never sees A's response, and neither blocks the
// other while it is in progress.
func TestS33KeyScopedToIdentity(t *testing.T) {
	g := newGate(t)
	s := newService(t, server.Options{Identity: tenant}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Tenant") == "A" {
				g.wait()
			}
			s.pay(w, r)
		})
	})
	const body = `{"amount":100,"currency":"EUR"}`
	ac := make(chan answer, 1)
	go func() { ac <- s.post("shared-key", body, "X-Tenant", "A") }()
	eventually(t, "A's handler", func() bool { return g.entered.Load() == 1 })

	b := s.post("shared-key", body, "X-Tenant", "B") // A is in progress: B is not blocked
	require.Equal(t, http.StatusCreated, b.status, "%s", b.body)
	assert.False(t, b.replayed())
	g.release()
	a := <-ac
	require.Equal(t, http.StatusCreated, a.status)
	assert.NotEqual(t, a.body, b.body, "A and B got one payment")

	for _, c := range []struct {
		tenant string
		want   answer
	}{{"A", a}, {"B", b}, {"A", a}} {
		got := s.post("shared-key", body, "X-Tenant", c.tenant)
		assert.True(t, got.replayed())
		assert.Equal(t, string(c.want.body), string(got.body), "tenant %s got another's answer", c.tenant)
	}
	assert.EqualValues(t, 2, s.effects.Load())

	// A third identity with the key and another body is a new operation, not a 422.
	other := s.post("shared-key", `{"amount":999,"currency":"EUR"}`, "X-Tenant", "C")
	assert.Equal(t, http.StatusCreated, other.status)

	// No identity, no scope: refused before anything is stored or run.
	anon := s.post("shared-key", body)
	assert.Equal(t, http.StatusForbidden, anon.status)
	assert.Equal(t, "identity", anon.problemType(t))
	assert.EqualValues(t, 3, s.effects.Load())
}

// Without Options.Identity, the identity is the Authorization header: two credentials are
// two scopes, and the same credential replays.
func TestDefaultIdentityIsAuthorization(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	const body = `{"amount":5,"currency":"EUR"}`
	a := s.post("k", body, "Authorization", "Bearer alice")
	b := s.post("k", body, "Authorization", "Bearer bob")
	assert.False(t, b.replayed())
	assert.NotEqual(t, a.body, b.body)
	again := s.post("k", body, "Authorization", "Bearer alice")
	assert.True(t, again.replayed())
	assert.Equal(t, a.body, again.body)
	assert.EqualValues(t, 2, s.effects.Load())
}

// Without Options.Identity, a request whose only credentials are cookies is refused, and
// no handler runs: two users told apart by their session cookie alone would otherwise be
// one scope and see each other's stored responses (S33). With a token beside the cookie,
// the token scopes it, whatever the cookie (a stickiness cookie changes on every response).
func TestDefaultIdentityRefusesCookieOnlyRequests(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	const body = `{"amount":5,"currency":"EUR"}`
	a := s.post("k", body, "Cookie", "session=alice")
	assert.Equal(t, http.StatusForbidden, a.status)
	assert.Equal(t, "identity", a.problemType(t))
	b := s.post("k", body, "Cookie", "session=bob")
	assert.Equal(t, http.StatusForbidden, b.status)
	assert.EqualValues(t, 0, s.effects.Load(), "no handler ran")

	first := s.post("k", body, "Authorization", "Bearer alice", "Cookie", "AWSALB=v1")
	again := s.post("k", body, "Authorization", "Bearer alice", "Cookie", "AWSALB=v2")
	assert.True(t, again.replayed())
	assert.Equal(t, first.body, again.body)
	assert.EqualValues(t, 1, s.effects.Load())
}
