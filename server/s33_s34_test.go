// s33_s34_test.go: S33 (a key is scoped to its identity) and S34 (the fingerprint is the
// canonical JSON: spelling does not matter, content does).

package server_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

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
	assert.Equal(t, 1, s.obs.count("mismatch"))
	assert.Equal(t, 3, s.obs.count("replayed"))
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
