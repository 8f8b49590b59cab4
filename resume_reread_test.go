// Resume reads each pending record twice: listed a page at a time
// (Store.Pending), then again under the operation's lock just before sending
// (Store.Reload). These tests hold Resume to the re-read: what is no longer
// due is not sent. Concurrent passes, and changes not yet committed, are in
// journal/boltjournal (reload_test.go), with the engine's side
// (read_test.go).

package idem

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An operation a call gave up on until later, after Resume listed it, is not
// sent by that pass: the re-read is checked for being due, not the listing.
func TestResumeSkipsOperationNoLongerDue(t *testing.T) {
	srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusCreated)
	})
	tr, clk := memTransport(t, &Options{Base: srv.base()})
	rec := pendingRecord("a")
	rec.URL, rec.Body, rec.Created = srv.URL+"/payments", []byte(`{"amount":700}`), clk.Now()
	rec.BodySHA256 = bodySum(rec.Body) // as a write-ahead has it
	require.NoError(t, insertRec(tr.journal, rec, true))
	page, err := pendingAfter(tr.journal, 0, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)

	rec.Attempts, rec.NextAttempt = 1, clk.Now().Add(time.Minute)
	require.NoError(t, saveRec(tr.journal, rec))
	lim, err := tr.cfg.callLimits(context.Background())
	require.NoError(t, err)
	resp, err := tr.resume(context.Background(), page[0], lim, false)
	require.ErrorIs(t, err, errNotDue)
	require.Nil(t, resp)
	require.Zero(t, srv.count(), "nothing sent before NextAttempt")
}
