// Tests that the view is read-only: no method but GET and HEAD is served,
// no query parameter changes anything, and reading it writes nothing to
// the journal file.

package journalhttp_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/journalhttp"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// snapshot is everything the journal holds and reports, bodies included,
// and the file's bytes: equal snapshots mean nothing changed.
func snapshot(t *testing.T, j *boltjournal.Journal) string {
	t.Helper()
	var b strings.Builder
	for rec, err := range j.All(context.Background()) {
		require.NoError(t, err)
		full, err := j.Reload(context.Background(), rec)
		require.NoError(t, err)
		js, err := json.Marshal(full)
		require.NoError(t, err)
		fmt.Fprintf(&b, "%d %s\n", journal.RefOf(rec).Seq, js)
	}
	n, err := j.PendingCount(context.Background())
	require.NoError(t, err)
	file, err := os.ReadFile(j.Path())
	require.NoError(t, err)
	fmt.Fprintf(&b, "pending %d, commits %d, latest %v, file %x\n", n, j.Stats().Commits, j.LatestWritten(),
		sha256.Sum256(file))
	return b.String()
}

// Every method but GET and HEAD is refused with 405 and Allow, whatever its
// body and query; GETs whose query names an action are refused with 400;
// and after all of them, and the GETs served, the journal and its file
// are as they were.
func TestHandlerIsReadOnly(t *testing.T) {
	l := newLive(t)
	l.srv.Script(testserver.Fault{},
		testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable, RetryAfter: "30"})
	_, err := l.call(t, "order-1/settled")
	require.NoError(t, err)
	_, err = l.call(t, "order-2/pending")
	require.Error(t, err)
	require.NoError(t, l.j.Flush(context.Background()))
	before := snapshot(t, l.j)
	require.Contains(t, before, "order-2/pending")

	actions := `{"state":"settled","status":201,"op":"order-2/pending"}`
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodTrace, "PROPFIND", "PURGE", "RESOLVE"} {
		for _, path := range []string{mount, mount + "?state=settled&op=order-2/pending&format=json"} {
			resp, raw, _ := fetch(t, l.view.URL, method, path, strings.NewReader(actions))
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", method, path)
			require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
			require.NotContains(t, string(raw), "order-", "%s answered with the journal's content", method)
			noSecrets(t, method, raw)
		}
	}
	// CONNECT never reaches a mux pattern; straight to the handler.
	rec := httptest.NewRecorder()
	journalhttp.Handler(l.j, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodConnect, mount, nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)

	for _, path := range []string{"?resolve=order-2/pending&status=201", "?discard=order-2/pending", "?prune=1",
		"?flush=1", "?format=xml", "?limit=0", "?limit=-1", "?limit=x", "?state=done", "?state=pending&retry=1"} {
		resp, raw, _ := fetch(t, l.view.URL, http.MethodGet, mount+path, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, raw)
		require.NotContains(t, string(raw), "order-", path)
	}
	for _, path := range []string{"", "?format=json", "?state=pending", "?op=order-*&limit=1&format=json"} {
		resp, _, _ := fetch(t, l.view.URL, http.MethodGet, mount+path, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		resp, _, _ = fetch(t, l.view.URL, http.MethodHead, mount+path, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	require.Equal(t, before, snapshot(t, l.j), "the journal changed")
}
