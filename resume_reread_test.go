// Resume reads each pending record twice: listed a page at a time
// (pendingAfter), then again under the operation's lock just before sending
// (reget). These tests hold the listing to the newest state without a commit,
// and the re-read to what get would return.

package idem

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func insertWithBody(t *testing.T, j *Journal, key, body string) *Record {
	t.Helper()
	rec := pendingRecord(key)
	rec.Body = []byte(body)
	require.NoError(t, insertRec(j, rec, true))
	return rec
}

func TestPendingAfterSeesDeferredChanges(t *testing.T) {
	t.Parallel()
	j, _ := testJournal(t)
	a := insertWithBody(t, j, "a", "body-a")
	b := insertWithBody(t, j, "b", "body-b")
	insertWithBody(t, j, "c", "body-c")

	release := holdCommits(j)
	a.State, a.Status = StateSettled, http.StatusCreated
	require.NoError(t, saveRec(j, a))
	b.Attempts, b.NextAttempt = 2, time.Now().Add(time.Hour).Round(0)
	require.NoError(t, saveRec(j, b))

	page, err := pendingAfter(j, 0, 10)
	require.NoError(t, err)
	require.Len(t, page, 2, "a settle not yet committed is not pending")
	require.Equal(t, []string{"b", "c"}, []string{page[0].Key, page[1].Key})
	require.Equal(t, 2, page[0].Attempts, "a deferred change stands in for the file")
	require.True(t, b.NextAttempt.Equal(page[0].NextAttempt))
	require.Nil(t, page[0].Body, "a listing holds no bodies")
	require.Equal(t, StatePending, onDisk(t, j, seqOf(a)).State, "nothing was committed")

	release()
	require.NoError(t, flushStore(j))
	got, err := j.Reload(context.Background(), page[0])
	require.NoError(t, err)
	require.Equal(t, "body-b", string(got.Body))
	require.Equal(t, 2, got.Attempts)
	require.Nil(t, journal.RefOf(got).Meta)
}

func TestRegetMatchesGet(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	rand.Read(key)
	for name, opts := range map[string]*JournalOptions{
		"plaintext": nil,
		"sealed":    {Encryption: &Keyring{Current: "A", Keys: map[string][]byte{"A": key}}},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := OpenJournal(t.TempDir()+"/idem.journal", opts)
			require.NoError(t, err)
			defer j.Close()
			small := insertWithBody(t, j, "small", `{"amount":700}`)
			large := insertWithBody(t, j, "large", string(bytes.Repeat([]byte("x"), 3*bodyChunk+5)))

			page, err := pendingAfter(j, 0, 10)
			require.NoError(t, err)
			require.Len(t, page, 2)
			for i, want := range []*Record{small, large} {
				got, err := j.Reload(context.Background(), page[i])
				require.NoError(t, err)
				fresh, err := getSeq(j, seqOf(want))
				require.NoError(t, err)
				require.Equal(t, fresh, got, "reget reads what get reads")
				require.Equal(t, want.Body, got.Body)
			}

			// Changed on disk since the listing: decoded again.
			small.Attempts, small.LastError = 3, "503"
			require.NoError(t, saveRec(j, small))
			require.NoError(t, flushStore(j))
			got, err := j.Reload(context.Background(), page[0])
			require.NoError(t, err)
			require.Equal(t, 3, got.Attempts)
			require.Equal(t, "503", got.LastError)

			// Settled since: reget says so, as get does.
			large.State = StateSettled
			require.NoError(t, saveRec(j, large))
			require.NoError(t, flushStore(j))
			got, err = j.Reload(context.Background(), page[1])
			require.NoError(t, err)
			require.Equal(t, StateSettled, got.State)
		})
	}
}

func TestRegetRefusesAlteredBody(t *testing.T) {
	j, _ := testJournal(t)
	insertWithBody(t, j, "a", `{"amount":700}`)
	page, err := pendingAfter(j, 0, 10)
	require.NoError(t, err)
	require.NoError(t, boltDB(j).Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBodies).Put(idKey(seqOf(page[0])), []byte(`{"amount":900}`))
	}))
	_, err = j.Reload(context.Background(), page[0])
	require.ErrorIs(t, err, ErrJournalCorrupt, "the metadata is unchanged, the body is not")
}

// An operation a call gave up on until later, after Resume listed it, is not
// sent by that pass: the re-read is checked for being due, not the listing.
func TestResumeSkipsOperationNoLongerDue(t *testing.T) {
	srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusCreated)
	})
	tr, clk := testTransport(t, &Options{Base: srv.base()})
	rec := pendingRecord("a")
	rec.URL, rec.Body, rec.Created = srv.URL+"/payments", []byte(`{"amount":700}`), clk.Now()
	require.NoError(t, insertRec(tr.bolt(), rec, true))
	page, err := pendingAfter(tr.bolt(), 0, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)

	rec.Attempts, rec.NextAttempt = 1, clk.Now().Add(time.Minute)
	require.NoError(t, saveRec(tr.bolt(), rec))
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
			tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1, ResumeConcurrency: 3},
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
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1, ResumeConcurrency: 16},
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
