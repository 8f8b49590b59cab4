package main

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// exitCode is the command's exit status: 0 for a nil err.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	return ee.ExitCode()
}

// An operator resolves one pending operation by its ID and discards another
// by the key idem minted for it; the file keeps both ends. Each refusal
// exits 1 (2 for a usage error) with a line that says why, and changes nothing.
func TestJournalResolveAndDiscard(t *testing.T) {
	bin := idemBinary(t)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: 503},
		testserver.Fault{Kind: testserver.FaultStatus, Status: 503})
	path := filepath.Join(t.TempDir(), "j.journal")
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1})
	require.NoError(t, err)
	for _, op := range []string{"order-1/charge", ""} {
		ctx := context.Background()
		if op != "" {
			ctx = idem.WithOperationID(ctx, op)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
			strings.NewReader(`{"amount":5,"currency":"eur","reference":"ref-`+op+`"}`))
		require.NoError(t, err)
		_, err = c.HTTPClient().Do(req)
		require.ErrorAs(t, err, new(*idem.PendingError))
	}
	recs, err := c.Journal().Records()
	require.NoError(t, err)
	minted := recs[1].Key

	// Held by the application: refused at once, saying so.
	out, err := runIdem(t, bin, 30*time.Second, "journal", "resolve", "-op", "order-1/charge", "-status", "201", path)
	require.Equal(t, 1, exitCode(t, err), out)
	require.Contains(t, out, "locked")
	require.Contains(t, out, "an application has it open")
	require.NoError(t, c.Close())

	out, err = runIdem(t, bin, 30*time.Second, "journal", "resolve", path, "-op", "order-1/charge", "-status", "201")
	require.NoError(t, err, out)
	require.Contains(t, out, "settled order-1/charge")
	require.Contains(t, out, "with status 201")
	out, err = runIdem(t, bin, 30*time.Second, "journal", "discard", "-key", minted, "-reason", "refunded, ticket 77", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "expired - (id 2, key "+minted+")")

	for _, bad := range []struct {
		args []string
		code int // 1 a refusal, 2 a usage error
		says string
	}{
		{[]string{"resolve", "-op", "order-1/charge", "-status", "200", path}, 1, "already final"},
		{[]string{"discard", "-key", minted, path}, 1, "already final"},
		{[]string{"discard", "-op", "order-9/charge", path}, 1, "no such operation"},
		{[]string{"resolve", "-op", "order-1/charge", path}, 2, "-status must be"},
		{[]string{"resolve", "-op", "x", "-key", "y", "-status", "201", path}, 2, "one of them"},
		{[]string{"discard", path}, 2, "one of them"},
		{[]string{"discard", "-op", "x"}, 2, "want one FILE"},
	} {
		out, err := runIdem(t, bin, 30*time.Second, append([]string{"journal"}, bad.args...)...)
		require.Equal(t, bad.code, exitCode(t, err), "%v: %s", bad.args, out)
		require.Contains(t, out, bad.says, "%v", bad.args)
	}
	out, err = runIdem(t, bin, 30*time.Second, "journal", "discard", "-nope", path)
	require.Equal(t, 2, exitCode(t, err), out)

	j, err := boltjournal.OpenReadOnly(path, 0)
	require.NoError(t, err)
	defer j.Close()
	recs, err = j.Records()
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, idem.StateSettled, recs[0].State)
	require.Equal(t, 201, recs[0].Status)
	require.Equal(t, idem.StateExpired, recs[1].State)
	require.Equal(t, "idem: discarded by hand: refunded, ticket 77", recs[1].LastError)
	require.Nil(t, recs[1].Body, "its body is gone")
	require.Zero(t, srv.Ledger().Payments(), "nothing was sent by hand")
}
