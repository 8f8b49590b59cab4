package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// The command has no keys: on a journal written with Options.Encryption, ls
// and show still work, and show prints a sealed body as a placeholder.
func TestJournalShowSealed(t *testing.T) {
	bin := idemBinary(t)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Script(testserver.Fault{}, testserver.Fault{Kind: testserver.FaultStatus, Status: 503})
	path := filepath.Join(t.TempDir(), "sealed.journal")
	key := make([]byte, idem.KeySize)
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1,
		Encryption: &idem.Keyring{Current: "k1", Keys: map[string][]byte{"k1": key}}})
	require.NoError(t, err)
	for _, op := range []string{"sealed-1", "sealed-2"} {
		req, err := http.NewRequestWithContext(idem.WithOperationID(context.Background(), op), http.MethodPost,
			srv.URL+"/payments?mode=x", strings.NewReader(`{"amount":5,"currency":"eur","reference":"`+op+`","card":"4111111111111111"}`))
		require.NoError(t, err)
		if resp, err := c.HTTPClient().Do(req); err == nil {
			resp.Body.Close()
		}
	}
	require.NoError(t, c.Close())

	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "sealed-1")
	require.Contains(t, out, "sealed-2")
	require.Contains(t, out, "2 record(s)")

	out, err = runIdem(t, bin, 30*time.Second, "journal", "show", path, "sealed-2")
	require.NoError(t, err, out)
	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.Equal(t, "pending", shown["state"])
	require.Equal(t, "k1", shown["kid"])
	require.Equal(t, true, shown["sealed"])
	require.Equal(t, "<encrypted key=k1>", shown["body"])
	require.NotContains(t, out, "4111111111111111")
	require.NotContains(t, out, "mode=x")
}
