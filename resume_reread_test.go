// Resume reads each pending record twice: listed a page at a time
// (pendingAfter), then again under the operation's lock just before sending
// (reget). These tests hold the listing to the newest state without a commit,
// and the re-read to what get would return.

package idem

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// holdCommits keeps deferred state changes from being committed (the flush
// timer finds a commit running) until the returned function is called.
func holdCommits(j *Journal) (release func()) {
	c := &j.commit
	c.mu.Lock()
	c.leading = true
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.leading = false
		c.idle.Broadcast()
		c.mu.Unlock()
	}
}

func insertWithBody(t *testing.T, j *Journal, key, body string) *Record {
	t.Helper()
	rec := pendingRecord(key)
	rec.Body = []byte(body)
	require.NoError(t, j.insert(rec, true))
	return rec
}

func TestPendingAfterSeesDeferredChanges(t *testing.T) {
	j, _ := testJournal(t)
	a := insertWithBody(t, j, "a", "body-a")
	b := insertWithBody(t, j, "b", "body-b")
	insertWithBody(t, j, "c", "body-c")

	release := holdCommits(j)
	a.State, a.Status = Settled, http.StatusCreated
	require.NoError(t, j.save(a))
	b.Attempts, b.NextAttempt = 2, time.Now().Add(time.Hour).Round(0)
	require.NoError(t, j.save(b))

	page, err := j.pendingAfter(0, 10)
	require.NoError(t, err)
	require.Len(t, page, 2, "a settle not yet committed is not pending")
	require.Equal(t, []string{"b", "c"}, []string{page[0].Key, page[1].Key})
	require.Equal(t, 2, page[0].Attempts, "a deferred change stands in for the file")
	require.True(t, b.NextAttempt.Equal(page[0].NextAttempt))
	require.Nil(t, page[0].Body, "a listing holds no bodies")
	require.Equal(t, Pending, onDisk(t, j, a.ID).State, "nothing was committed")

	release()
	require.NoError(t, j.flush())
	got, err := j.reget(page[0])
	require.NoError(t, err)
	require.Equal(t, "body-b", string(got.Body))
	require.Equal(t, 2, got.Attempts)
	require.Nil(t, got.listed)
}

func TestRegetMatchesGet(t *testing.T) {
	key := make([]byte, 32)
	rand.Read(key)
	for name, opts := range map[string]*Options{
		"plaintext": nil,
		"sealed":    {Encryption: &Keyring{Current: "A", Keys: map[string][]byte{"A": key}}},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := OpenJournal(t.TempDir()+"/idem.journal", opts)
			require.NoError(t, err)
			defer j.Close()
			small := insertWithBody(t, j, "small", `{"amount":700}`)
			large := insertWithBody(t, j, "large", string(bytes.Repeat([]byte("x"), 3*bodyChunk+5)))

			page, err := j.pendingAfter(0, 10)
			require.NoError(t, err)
			require.Len(t, page, 2)
			for i, want := range []*Record{small, large} {
				got, err := j.reget(page[i])
				require.NoError(t, err)
				fresh, err := j.get(want.ID)
				require.NoError(t, err)
				require.Equal(t, fresh, got, "reget reads what get reads")
				require.Equal(t, want.Body, got.Body)
			}

			// Changed on disk since the listing: decoded again.
			small.Attempts, small.LastError = 3, "503"
			require.NoError(t, j.save(small))
			require.NoError(t, j.flush())
			got, err := j.reget(page[0])
			require.NoError(t, err)
			require.Equal(t, 3, got.Attempts)
			require.Equal(t, "503", got.LastError)

			// Settled since: reget says so, as get does.
			large.State = Settled
			require.NoError(t, j.save(large))
			require.NoError(t, j.flush())
			got, err = j.reget(page[1])
			require.NoError(t, err)
			require.Equal(t, Settled, got.State)
		})
	}
}

func TestRegetRefusesAlteredBody(t *testing.T) {
	j, _ := testJournal(t)
	insertWithBody(t, j, "a", `{"amount":700}`)
	page, err := j.pendingAfter(0, 10)
	require.NoError(t, err)
	require.NoError(t, j.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBodies).Put(idKey(page[0].ID), []byte(`{"amount":900}`))
	}))
	_, err = j.reget(page[0])
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
	require.NoError(t, tr.journal.insert(rec, true))
	page, err := tr.journal.pendingAfter(0, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)

	rec.Attempts, rec.NextAttempt = 1, clk.Now().Add(time.Minute)
	require.NoError(t, tr.journal.save(rec))
	lim, err := tr.cfg.callLimits(context.Background())
	require.NoError(t, err)
	resp, err := tr.resume(context.Background(), page[0], lim, false)
	require.ErrorIs(t, err, errNotDue)
	require.Nil(t, resp)
	require.Zero(t, srv.count(), "nothing sent before NextAttempt")
}
