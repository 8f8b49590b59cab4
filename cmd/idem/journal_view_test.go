// ls, show and stats on a running service's journal view (journalhttp),
// while the service holds its journal file: they print what they print for
// the file, without bodies, header values, queries or identities.

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/journalhttp"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

var viewSecrets = []string{"SECRET-BODY-4111", "SECRET-AUTH-TOKEN", "SECRET-QUERY-API-KEY", "SECRET-QUERY-PLAIN",
	"SECRET-HEADER-VALUE", "SECRET-TENANT", "pw-s3cret"}

// serviceWithView is a service holding a journal at path, with one payment
// settled and one pending, and its journal view mounted on a debug mux; it
// returns the view's URL and a func that stops the service.
func serviceWithView(t *testing.T, path string) (viewURL string, stop func()) {
	t.Helper()
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Script(testserver.Fault{}, testserver.Fault{Kind: testserver.FaultStatus, Status: 503, RetryAfter: "60"})
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1, SensitiveQueryParams: []string{"api_key"}})
	require.NoError(t, err)
	for _, op := range []string{"order-1/charge", "order-2/charge"} {
		ctx := idem.WithIdentity(idem.WithOperationID(context.Background(), op), "SECRET-TENANT")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost,
			srv.URL+"/payments?api_key=SECRET-QUERY-API-KEY&ref=SECRET-QUERY-PLAIN",
			strings.NewReader(`{"amount":5,"currency":"eur","reference":"`+op+`","card":"SECRET-BODY-4111"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer SECRET-AUTH-TOKEN")
		req.Header.Set("X-Api-Key", "SECRET-HEADER-VALUE")
		if resp, err := c.HTTPClient().Do(req); err == nil {
			resp.Body.Close()
		}
	}
	debug := http.NewServeMux()
	debug.Handle("/debug/idem/journal", journalhttp.Handler(c.Journal(), nil))
	view := httptest.NewServer(debug)
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			view.Close()
			c.Close()
		}
	}
	t.Cleanup(stop)
	return view.URL + "/debug/idem/journal", stop
}

// cutQueries replaces each URL's query in ls output by "?…", as a view shows it.
func cutQueries(rows [][]string) [][]string {
	for _, r := range rows {
		if i := strings.IndexByte(r[4], '?'); i >= 0 {
			r[4] = r[4][:i] + "?…"
		}
	}
	return rows
}

func TestJournalCommandsOnAView(t *testing.T) {
	bin := idemBinary(t)
	path := filepath.Join(t.TempDir(), "service.journal")
	viewURL, stop := serviceWithView(t, path)
	withPassword := strings.Replace(viewURL, "http://", "http://operator:pw-s3cret@", 1)
	var all strings.Builder
	run := func(args ...string) string {
		t.Helper()
		out, err := runIdem(t, bin, 30*time.Second, args...)
		require.NoError(t, err, out)
		all.WriteString(out)
		return out
	}

	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", path)
	require.Error(t, err, "the service holds the file")
	require.Contains(t, out, "idem journal ls http://host:port/debug/idem/journal", "the lock's message points at the view")

	viewRows := lsRows(t, bin, withPassword)
	require.Len(t, viewRows, 2)
	require.Equal(t, []string{"pending", "order-2/charge", "1+?", "503"}, []string{viewRows[0][1], viewRows[0][2], viewRows[0][5], viewRows[0][6]})
	require.Equal(t, []string{"settled", "order-1/charge", "1", "201"}, []string{viewRows[1][1], viewRows[1][2], viewRows[1][5], viewRows[1][6]})
	pending := strings.Split(strings.TrimSpace(run("journal", "ls", "-state", "pending", viewURL)), "\n")
	require.Len(t, pending, 3, pending)
	require.Contains(t, pending[1], "order-2/charge")
	require.Contains(t, run("journal", "ls", "-op", "order-1*", viewURL), "1 record(s)")

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(run("journal", "ls", "-json", viewURL)), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	require.Len(t, lines, 2)
	require.Equal(t, "order-2/charge", lines[0]["op"])
	require.Equal(t, true, lines[0]["attempts_uncertain"])
	require.NotContains(t, lines[0], "body")
	require.NotContains(t, lines[0], "header")

	out = run("journal", "stats", withPassword)
	require.Contains(t, out, "journal       http://operator:xxxxx@127.0.0.1:")
	require.Contains(t, out, "records       2: 1 pending, 1 settled, 0 expired, 0 failed")
	require.Contains(t, out, "oldest pending order-2/charge")
	require.Regexp(t, `next attempt  \d{4}-`, out)
	var s journalSummary
	require.NoError(t, json.Unmarshal([]byte(run("journal", "stats", "-json", viewURL)), &s))
	require.Equal(t, map[string]int{"pending": 1, "settled": 1, "expired": 0, "failed": 0}, s.States)
	require.Equal(t, 2, s.Total)
	require.Equal(t, "order-2/charge", s.OldestPending.OperationID)

	out = run("journal", "show", viewURL, "order-2/charge")
	require.Contains(t, out, `"state": "pending"`)
	require.Contains(t, out, `"url": "http://127.0.0.1:`)
	require.NotContains(t, out, `"body"`)

	for _, sub := range []string{"prune", "resume", "accept-older"} {
		out, err := runIdem(t, bin, 30*time.Second, "journal", sub, viewURL)
		require.Error(t, err, sub)
		require.Contains(t, out, "not on a journal view", sub)
	}
	out, err = runIdem(t, bin, 30*time.Second, "journal", "resolve", "-op", "order-2/charge", "-status", "201", viewURL)
	require.Error(t, err)
	require.Contains(t, out, "not on a journal view")
	out, err = runIdem(t, bin, 30*time.Second, "journal", "ls", strings.TrimSuffix(viewURL, "/journal")+"/nothing")
	require.Error(t, err)
	require.Contains(t, out, "404 Not Found")
	out, err = runIdem(t, bin, 30*time.Second, "journal", "ls", viewURL+"?flush=1")
	require.Error(t, err)
	require.Contains(t, out, `400 Bad Request: journalhttp: unknown parameter "flush"`)
	require.Contains(t, run("journal", "show", viewURL, "order-2/charge"), `"op": "order-2/charge"`, "nothing changed")
	for _, secret := range viewSecrets {
		require.NotContains(t, all.String(), secret)
	}

	// Stopped, the service lets go of its file: ls reads it, and prints
	// what it printed through the view, the queries aside.
	stop()
	require.Equal(t, viewRows, cutQueries(lsRows(t, bin, path)))
}

// A view that lists fewer operations than match says so on stderr, named
// by the command like its errors.
func TestJournalLsOnATruncatedView(t *testing.T) {
	bin := idemBinary(t)
	viewURL, _ := serviceWithView(t, filepath.Join(t.TempDir(), "service.journal"))
	stdout, stderr, code := runStreams(t, bin, "journal", "ls", viewURL+"?limit=1")
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "1 record(s)")
	require.Equal(t, "idem journal ls: the view lists 1 of the 2 operations that match (its limit); narrow with -state or -op\n", stderr)
}
