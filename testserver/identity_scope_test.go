// identity_scope_test.go proves Options.Identity: with it, a key is scoped by the identity
// it returns (an account header here), so a refreshed token replays its account's result
// and another account's same key is another operation; without it, by the Authorization
// header, so a refreshed token is a new client. Only a hash of the identity reaches the
// middleware's Store.

package testserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/stretchr/testify/require"
)

// The tokens of one account before and after a refresh, and its header.
var (
	acme        = []string{"Authorization", "Bearer acme-token-1", "X-Account", "acct_acme"}
	acmeRefresh = []string{"Authorization", "Bearer acme-token-2", "X-Account", "acct_acme"}
	globex      = []string{"Authorization", "Bearer acme-token-1", "X-Account", "acct_globex"}
)

func TestOptionsIdentityScopesKeys(t *testing.T) {
	s := newTestServer(t, &Options{Identity: func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil }})
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

// scopeStore is a memstore that remembers the Scopes it was asked to claim.
type scopeStore struct {
	*memstore.Store
	mu     sync.Mutex
	scopes []server.Scope
}

func (st *scopeStore) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	st.mu.Lock()
	st.scopes = append(st.scopes, sc)
	st.mu.Unlock()
	return st.Store.Claim(ctx, sc, token, fp, lease, ttl)
}

// An Identity that returns the token itself: only its hash reaches the Store or the log.
func TestOptionsIdentityKeepsOnlyAHash(t *testing.T) {
	var mu sync.Mutex
	var logged strings.Builder
	store := &scopeStore{Store: memstore.New(nil)}
	s := newTestServer(t, &Options{
		Store:    store,
		Identity: func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil },
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(&logged, format+"\n", args...)
		},
	})
	body := payBody("order-1", 1250)
	require.Equal(t, http.StatusCreated, post(t, s, "K", body, acme...).status)
	require.Equal(t, "true", post(t, s, "K", body, acme...).header.Get(replayedHeader))

	store.mu.Lock()
	scopes := slices.Clone(store.scopes)
	store.mu.Unlock()
	require.Len(t, scopes, 2)
	require.Equal(t, scopes[0], scopes[1], "one record")
	require.Equal(t, "K", scopes[0].Key)
	require.NotContains(t, scopes[0].Identity, "acme-token-1")
	require.Regexp(t, "^[0-9a-f]{64}$", scopes[0].Identity, "a hash")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, logged.String())
	require.NotContains(t, logged.String(), "acme-token-1")
}
