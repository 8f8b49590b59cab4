// Tests of Reload, the re-read Resume makes of each pending record just
// before sending it (read.go), through an idem Transport: concurrent passes
// over staged bodies send each operation once, with its exact body, and
// state changes not yet committed are what Resume goes by. read_test.go has
// the journal's own side.

package boltjournal_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// insertPending writes n pending operations to j, every third with a body
// large enough to be staged, and returns each body by key.
func insertPending(t *testing.T, j *boltjournal.Journal, url string, n int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	for i := range n {
		op := fmt.Sprint("op", i)
		size := 20 + i
		if i%3 == 0 {
			size = boltjournal.StageMin + i
		}
		rec := &idem.Record{Key: "key-" + op, OperationID: op, Method: http.MethodPost, URL: url,
			Body: boltjournal.StagedBody(op, size), State: idem.StatePending, Created: time.Now(), Updated: time.Now(), CallerKey: true}
		require.NoError(t, j.Create(context.Background(), rec))
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
			srv := newRecordingServer(t)
			srv.retryAfter = "60"
			srv.failing.Store(status == http.StatusServiceUnavailable)
			j := boltjournal.FastJournal(t)
			tr, err := idem.NewTransport(j, &idem.Options{MaxAttempts: 1, ResumeConcurrency: 3, Base: srv.Client().Transport})
			require.NoError(t, err)
			want := insertPending(t, j, srv.URL+"/p", 30)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					require.NoError(t, tr.Resume(context.Background(), nil))
				})
			}
			wg.Wait()
			sent := map[string]int{}
			for _, r := range srv.requests() {
				k := r.Header.Get(idem.DefaultKeyHeader)
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
	srv := newRecordingServer(t)
	j := boltjournal.FastJournal(t)
	tr, err := idem.NewTransport(j, &idem.Options{MaxAttempts: 1, ResumeConcurrency: 16, Base: srv.Client().Transport})
	require.NoError(t, err)
	const n = 2*256 + 37 // more than two of Resume's pages (256 records each, idem's resume_pass.go)
	now := time.Now()
	var recs []*idem.Record
	for i := range n {
		rec := &idem.Record{Key: fmt.Sprint("k", i), Method: http.MethodPost, URL: srv.URL + "/p",
			Body: []byte(fmt.Sprint("b", i)), State: idem.StatePending, Created: now, CallerKey: true}
		require.NoError(t, j.Create(context.Background(), rec))
		recs = append(recs, rec)
	}
	release := j.HoldCommits()
	due := map[string]bool{}
	for i, rec := range recs {
		cp := *rec
		switch i % 3 {
		case 0: // given up on until later
			cp.Attempts, cp.NextAttempt = 1, now.Add(time.Hour)
		case 1:
			cp.State, cp.Status, cp.Body = idem.StateSettled, http.StatusCreated, nil
		default:
			due[rec.Key] = true
			continue
		}
		require.NoError(t, j.Update(context.Background(), &cp, journal.Deferred))
	}
	require.NoError(t, tr.Resume(context.Background(), nil))
	release()
	sent := map[string]int{}
	for _, r := range srv.requests() {
		sent[r.Header.Get(idem.DefaultKeyHeader)]++
	}
	require.Len(t, sent, len(due))
	for k := range due {
		require.Equal(t, 1, sent[k], k)
	}
}
