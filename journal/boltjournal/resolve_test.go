// Tests for resolve.go: Resolve and Discard, by operation ID and by key,
// refuse what is held, unknown, ambiguous or final, drop bodies, and last
// across a reopen. The root's journal_resolve_test.go checks what calls and
// Resume do afterwards.

package boltjournal

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// bodyEntries counts the bodies bucket's entries (whole bodies and chunks)
// of record id.
func bodyEntries(t *testing.T, j *Journal, id uint64) int {
	t.Helper()
	n := 0
	require.NoError(t, j.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBodies).Cursor()
		for k, _ := c.Seek(idKey(id)); bytes.HasPrefix(k, idKey(id)); k, _ = c.Next() {
			n++
		}
		return nil
	}))
	return n
}

// pendingOp writes a pending operation with a body: under operation ID op
// if set, and a key the caller chose if callerKey.
func pendingOp(t *testing.T, j *Journal, key, op string, callerKey bool) *Record {
	t.Helper()
	rec := &Record{Key: key, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/payments",
		Body: bytes.Repeat([]byte("b"), 3*bodyChunk+5), State: StatePending, Created: time.Now(), Updated: time.Now()}
	require.NoError(t, j.insert(rec, callerKey))
	require.NotZero(t, bodyEntries(t, j, seqOf(rec)))
	return rec
}

func TestResolveAndDiscard(t *testing.T) {
	j, _ := testJournal(t)
	pendingOp(t, j, "key-1", "order-1/charge", false)
	pendingOp(t, j, "minted-key-2", "", false)
	pendingOp(t, j, "caller-key-3", "", true)

	rec, err := j.Resolve(journal.Name{OperationID: "order-1/charge"}, http.StatusCreated)
	require.NoError(t, err)
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, http.StatusCreated, rec.Status)
	require.Nil(t, rec.Body)
	require.Zero(t, bodyEntries(t, j, seqOf(rec)), "a resolved operation keeps no body")

	rec, err = j.Discard(journal.Name{Key: "minted-key-2"}, "refunded by support, ticket 77")
	require.NoError(t, err)
	require.Equal(t, StateExpired, rec.State)
	require.Equal(t, "idem: discarded by hand: refunded by support, ticket 77", rec.LastError)
	require.Zero(t, bodyEntries(t, j, seqOf(rec)))
	rec, err = j.Discard(journal.Name{Key: "caller-key-3"}, "")
	require.NoError(t, err)
	require.Equal(t, journal.DiscardedError, rec.LastError)

	// Refused: already final, unknown, ambiguous, not a final status.
	_, err = j.Resolve(journal.Name{OperationID: "order-1/charge"}, http.StatusOK)
	require.ErrorIs(t, err, journal.ErrFinal)
	_, err = j.Discard(journal.Name{OperationID: "order-1/charge"}, "")
	require.ErrorIs(t, err, journal.ErrFinal)
	_, err = j.Discard(journal.Name{Key: "minted-key-2"}, "")
	require.ErrorIs(t, err, journal.ErrFinal, "discarded already")
	_, err = j.Resolve(journal.Name{OperationID: "order-9/charge"}, http.StatusCreated)
	require.ErrorIs(t, err, journal.ErrNotFound)
	_, err = j.Discard(journal.Name{Key: "no-such-key"}, "")
	require.ErrorIs(t, err, journal.ErrNotFound)
	_, err = j.Resolve(journal.Name{OperationID: "order-1/charge", Key: "minted-key-2"}, http.StatusCreated)
	require.Error(t, err)
	_, err = j.Resolve(journal.Name{}, http.StatusCreated)
	require.Error(t, err)
	_, err = j.Resolve(journal.Name{Key: "caller-key-3"}, 100)
	require.Error(t, err)

	// Committed: the same after a reopen.
	j2 := reopen(t, j)
	recs, err := j2.Records()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for _, r := range recs {
		want := StateExpired
		if r.OperationID == "order-1/charge" {
			want = StateSettled
		}
		require.Equal(t, want, r.State, "record %d", seqOf(r))
		require.Nil(t, r.Body)
	}
}

// Resolve and Discard refuse an operation held for sending in this process
// (Store.Claim), and a journal opened read-only.
func TestResolveRefusesHeld(t *testing.T) {
	j, path := testJournal(t)
	pendingOp(t, j, "key-held", "held", false)
	held := journal.Name{OperationID: "held"}
	require.NoError(t, j.Claim(context.Background(), held))
	_, err := j.Resolve(held, http.StatusCreated)
	require.ErrorIs(t, err, journal.ErrBusy)
	_, err = j.Discard(held, "")
	require.ErrorIs(t, err, journal.ErrBusy)
	j.Release(held)
	rec, err := j.Discard(held, "")
	require.NoError(t, err, "free once released")
	require.Equal(t, StateExpired, rec.State)

	require.NoError(t, j.Close())
	ro, err := OpenReadOnly(path, 0)
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Resolve(held, http.StatusCreated)
	require.ErrorIs(t, err, journal.ErrInvalidOptions)
}
