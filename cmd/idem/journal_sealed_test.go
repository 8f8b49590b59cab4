package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// The command has no keys: on a journal written with Options.Journal.Encryption, ls
// and show still work, and show prints a sealed body as a placeholder.
func TestJournalShowSealed(t *testing.T) {
	bin := idemBinary(t)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Script(testserver.Fault{}, testserver.Fault{Kind: testserver.FaultStatus, Status: 503})
	path := filepath.Join(t.TempDir(), "sealed.journal")
	key := make([]byte, boltjournal.KeySize)
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1,
		Journal: boltjournal.Options{Encryption: &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": key}}}})
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

// Without keys, resume reports a sealed operation as not sent, and prune
// works; -Q puts back a query parameter the journal never kept.
func TestJournalResumeAndPruneSealed(t *testing.T) {
	bin := idemBinary(t)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: 503},
		testserver.Fault{Kind: testserver.FaultStatus, Status: 503})
	path := filepath.Join(t.TempDir(), "sealed.journal")
	soon := time.Millisecond // the next attempt is due at once
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1, InitialInterval: soon, MaxInterval: soon,
		Journal: boltjournal.Options{Encryption: &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": make([]byte, boltjournal.KeySize)}}}})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(idem.WithOperationID(context.Background(), "sealed-p"), http.MethodPost,
		srv.URL+"/payments", strings.NewReader(`{"amount":5,"currency":"eur","reference":"sealed-p"}`))
	require.NoError(t, err)
	_, err = c.HTTPClient().Do(req)
	require.ErrorAs(t, err, new(*idem.PendingError))
	require.NoError(t, c.Close())

	out, err := runIdem(t, bin, 30*time.Second, "journal", "resume", path)
	require.Error(t, err, out)
	require.Contains(t, out, "not sent")
	require.Contains(t, out, "sealed-p")
	out, err = runIdem(t, bin, 30*time.Second, "journal", "prune", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "pruned 0 record(s)")
	require.Zero(t, srv.Ledger().Payments(), "nothing sent")

	// A plain journal whose token was cut: -Q puts it back.
	plain := filepath.Join(t.TempDir(), "plain.journal")
	c, err = idem.Open(plain, &idem.Options{MaxAttempts: 1, InitialInterval: soon, MaxInterval: soon,
		SensitiveQueryParams: []string{"api_key"}})
	require.NoError(t, err)
	req, err = http.NewRequestWithContext(idem.WithOperationID(context.Background(), "query-p"), http.MethodPost,
		srv.URL+"/payments?api_key=secret-123&mode=x", strings.NewReader(`{"amount":5,"currency":"eur","reference":"query-p"}`))
	require.NoError(t, err)
	_, err = c.HTTPClient().Do(req)
	require.ErrorAs(t, err, new(*idem.PendingError))
	require.NoError(t, c.Close())
	out, err = runIdem(t, bin, 30*time.Second, "journal", "resume", plain)
	require.Error(t, err, out)
	require.Contains(t, out, "not sent")
	out, err = runIdem(t, bin, 30*time.Second, "journal", "resume", plain, "-Q", "api_key=secret-123")
	require.NoError(t, err, out)
	require.NotContains(t, out, "secret-123")
	require.NoError(t, srv.Ledger().Check([]string{"query-p"}))
}

// During an outage, Resume holds back what the retry budget does not allow
// and reports one operation per host; the command counts the others as not
// tried instead of leaving them out of its summary.
func TestJournalResumeCountsHeldBack(t *testing.T) {
	bin := idemBinary(t)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	path := filepath.Join(t.TempDir(), "outage.journal")
	soon := time.Millisecond
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1, InitialInterval: soon, MaxInterval: soon,
		RetryBudget: idem.RetryBudget{Disabled: true}})
	require.NoError(t, err)
	const n = 150 // more than the default burst of 100
	for i := range n {
		req, err := http.NewRequest(http.MethodPost, down.URL+"/payments", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		require.NoError(t, err)
		_, err = c.HTTPClient().Do(req)
		require.ErrorAs(t, err, new(*idem.PendingError))
	}
	require.NoError(t, c.Close())
	time.Sleep(5 * soon) // past every next-attempt time

	out, err := runIdem(t, bin, time.Minute, "journal", "resume", "-max-attempts", "1", path)
	require.Error(t, err, out)
	require.Contains(t, out, "not tried: ")
	require.Contains(t, out, fmt.Sprintf("idem journal resume: %d operation(s) not settled", n))
}
