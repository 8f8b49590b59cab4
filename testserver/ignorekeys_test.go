package testserver

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// With IgnoreKeys the server is a provider that does not honour idempotency keys: the same
// key charges twice, nothing is replayed, and a look-up by reference finds both payments.
func TestIgnoreKeysChargesEveryRequest(t *testing.T) {
	s := newTestServer(t, &Options{IgnoreKeys: true, RequireKey: true})
	for range 2 {
		a := post(t, s, "k", payBody("r", 1))
		require.Equal(t, http.StatusCreated, a.status)
		require.Empty(t, a.header.Get("Idempotent-Replayed"))
	}
	require.Equal(t, http.StatusCreated, post(t, s, "", payBody("q", 1)).status, "no key required either")
	l := s.Ledger()
	require.Equal(t, map[string]int{"r": 2, "q": 1}, l.Effects)
	require.Zero(t, l.Replays)
	require.Zero(t, l.MissingKey)

	a := get(t, s, "/payments?reference=r")
	require.Equal(t, http.StatusOK, a.status)
	var list struct{ Data []struct{ ID string } }
	require.NoError(t, json.Unmarshal(a.body, &list))
	require.Len(t, list.Data, 2)
}
