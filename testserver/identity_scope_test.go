// identity_scope_test.go proves Options.Identity: with it, a key is scoped by the identity
// it returns (an account header here), so a refreshed token replays its account's result
// and another account's same key is another operation; without it, by the Authorization
// header, so a refreshed token is a new client. Only a hash of the identity is kept.

package testserver

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tokens of one account before and after a refresh, and its header.
var (
	acme        = []string{"Authorization", "Bearer acme-token-1", "X-Account", "acct_acme"}
	acmeRefresh = []string{"Authorization", "Bearer acme-token-2", "X-Account", "acct_acme"}
	globex      = []string{"Authorization", "Bearer acme-token-1", "X-Account", "acct_globex"}
)

func TestOptionsIdentityScopesKeys(t *testing.T) {
	s := newTestServer(t, &Options{Identity: func(r *http.Request) string { return r.Header.Get("X-Account") }})
	body := payBody("order-1", 1250)

	first := post(t, s, "K", body, acme...)
	require.Equal(t, http.StatusCreated, first.status, "body %s", first.body)

	// The same account with a refreshed token: the same client, so a replay.
	again := post(t, s, "K", body, acmeRefresh...)
	require.Equal(t, "true", again.header.Get(replayedHeader), "a refreshed token is a new client")
	require.Equal(t, decodePayment(t, first), decodePayment(t, again))
	require.Equal(t, map[string]int{"order-1": 1}, s.Ledger().Effects)

	// Another account, even with acme's token: another operation. No account: anonymous.
	for _, who := range [][]string{globex, {"Authorization", "Bearer acme-token-1"}} {
		a := post(t, s, "K", body, who...)
		require.Equal(t, http.StatusCreated, a.status, "%v: body %s", who, a.body)
		require.Empty(t, a.header.Get(replayedHeader), "%v got acme's result", who)
	}
	require.Equal(t, map[string]int{"order-1": 3}, s.Ledger().Effects)
	require.Equal(t, 1, s.Ledger().Replays)
}

func TestOptionsIdentityNilScopesByAuthorization(t *testing.T) {
	s := newTestServer(t, nil)
	body := payBody("order-1", 1250)
	require.Equal(t, http.StatusCreated, post(t, s, "K", body, acme...).status)

	// A refreshed token is a new client, whatever the account header says.
	a := post(t, s, "K", body, acmeRefresh...)
	require.Equal(t, http.StatusCreated, a.status, "body %s", a.body)
	require.Empty(t, a.header.Get(replayedHeader))
	// The same token is the same client, under another account header too.
	require.Equal(t, "true", post(t, s, "K", body, globex...).header.Get(replayedHeader))
	// Without Authorization: anonymous, one client.
	require.Equal(t, http.StatusCreated, post(t, s, "K", body).status)
	require.Equal(t, "true", post(t, s, "K", body).header.Get(replayedHeader))
	require.Equal(t, map[string]int{"order-1": 3}, s.Ledger().Effects)
}

// An Identity that returns the token itself: only its hash is kept or logged.
func TestOptionsIdentityKeepsOnlyAHash(t *testing.T) {
	var mu sync.Mutex
	var logged strings.Builder
	s := newTestServer(t, &Options{
		Identity: func(r *http.Request) string { return r.Header.Get("Authorization") },
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(&logged, format+"\n", args...)
		},
	})
	body := payBody("order-1", 1250)
	require.Equal(t, http.StatusCreated, post(t, s, "K", body, acme...).status)
	require.Equal(t, "true", post(t, s, "K", body, acme...).header.Get(replayedHeader))

	s.keys.mu.Lock()
	var ids []string
	for sc := range s.keys.entries {
		ids = append(ids, sc.identity)
	}
	s.keys.mu.Unlock()
	require.Len(t, ids, 1)
	require.NotContains(t, ids[0], "acme-token-1")
	require.True(t, strings.HasPrefix(ids[0], "id:"), "a hash: %q", ids[0])
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, logged.String())
	require.NotContains(t, logged.String(), "acme-token-1")
}
