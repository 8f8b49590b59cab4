// Tests for Open (client.go) from inside the package: the journal options it
// derives from Options, here Retention raised to KeyTTL.

package idem

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

func TestRetentionBelowKeyTTLKeepsSettledOperation(t *testing.T) {
	t.Parallel()
	// Open prunes with Retention; raised to KeyTTL, it must keep a record
	// whose key the server still replays, or the operation ID would mint a
	// second key and charge twice.
	srv, wire := startPayments(t, nil), newWireLog(t)
	j, path := testJournal(t)
	tr, _ := transportOn(t, j, Options{}, wire, time.Now().Add(-time.Hour))
	ctx := WithOperationID(context.Background(), "op-r16")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-r16", 1600)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.NoError(t, j.Close())

	c, err := Open(path, &Options{Journal: boltjournal.Options{Retention: time.Millisecond}, Base: wire})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	rec, err := c.Journal().Lookup("op-r16")
	require.NoError(t, err)
	require.NotNil(t, rec, "pruned within KeyTTL")
	require.Equal(t, StateSettled, rec.State)

	req, _ = paymentRequest(t, ctx, srv.URL, "order-r16", 1600)
	resp, err = c.HTTPClient().Do(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, map[string]int{"order-r16": 1}, srv.Ledger().Effects)
}
