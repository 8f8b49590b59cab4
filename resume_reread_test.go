// Resume reads each pending record twice: listed a page at a time
// (Store.Pending), then again under the operation's lock just before sending
// (Store.Reload). These tests hold Resume to the re-read: what is no longer
// due is not sent, and concurrent passes send each operation once. The
// engine's side is in journal/boltjournal (read_test.go).

package idem

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
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

// insertPending writes n pending operations to tr's journal, every third
// with a body large enough to be staged, and returns each body by key.
func insertPending(t *testing.T, tr *Transport, clk *fakeClock, url string, n int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	for i := range n {
		op := fmt.Sprint("op", i)
		size := 20 + i
		if i%3 == 0 {
			size = stageMin + i
		}
		rec := &Record{Key: "key-" + op, OperationID: op, Method: http.MethodPost, URL: url,
			Body: stagedBody(op, size), State: StatePending, Created: clk.Now(), Updated: clk.Now()}
		require.NoError(t, insertRec(tr.bolt(), rec, true))
		want["key-"+op] = rec.Body
	}
	return want
}

// Several Resume passes at once, each settling or giving up (Retry-After)
// what it sends: every operation is sent exactly once, with its exact body.
// Without the re-read's check for being due, a pass sent again what another
// had just given up on.
func TestConcurrentResumePassesSendOnce(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusCreated, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			tr, clk, srv := scenarioOver(t, fastJournal(t), &Options{MaxAttempts: 1, ResumeConcurrency: 3},
				func(_ int, w http.ResponseWriter, _ *http.Request) {
					reply(w, status, "Retry-After", "60")
				})
			want := insertPending(t, tr, clk, srv.URL+"/p", 30)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					require.NoError(t, tr.Resume(context.Background(), nil))
				})
			}
			wg.Wait()
			sent := map[string]int{}
			for _, r := range srv.requests() {
				k := r.Header.Get(DefaultKeyHeader)
				sent[k]++
				require.True(t, bytes.Equal(want[k], r.Body), k)
			}
			for k := range want {
				require.Equal(t, 1, sent[k], "%s sent %d times", k, sent[k])
			}
		})
	}
}

// Resume over more than a page of records whose newest state is not yet
// committed: it sends exactly the due ones, each once.
func TestResumePagesWithUncommittedChanges(t *testing.T) {
	t.Parallel()
	tr, clk, srv := scenarioOver(t, fastJournal(t), &Options{MaxAttempts: 1, ResumeConcurrency: 16},
		func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
	const n = 2*resumePage + 37
	var recs []*Record
	for i := range n {
		rec := &Record{Key: fmt.Sprint("k", i), Method: http.MethodPost, URL: srv.URL + "/p",
			Body: []byte(fmt.Sprint("b", i)), State: StatePending, Created: clk.Now()}
		require.NoError(t, insertRec(tr.bolt(), rec, true))
		recs = append(recs, rec)
	}
	release := holdCommits(tr.bolt())
	due := map[string]bool{}
	for i, rec := range recs {
		cp := *rec
		switch i % 3 {
		case 0: // given up on until later
			cp.Attempts, cp.NextAttempt = 1, clk.Now().Add(time.Hour)
		case 1:
			cp.State, cp.Status, cp.Body = StateSettled, http.StatusCreated, nil
		default:
			due[rec.Key] = true
			continue
		}
		require.NoError(t, saveRec(tr.bolt(), &cp))
	}
	require.NoError(t, tr.Resume(context.Background(), nil))
	release()
	sent := map[string]int{}
	for _, r := range srv.requests() {
		sent[r.Header.Get(DefaultKeyHeader)]++
	}
	require.Len(t, sent, len(due))
	for k := range due {
		require.Equal(t, 1, sent[k], k)
	}
}
