// Tests for inline.go: small bodies live in their record's value, and every
// state change carries them over or drops them as the body bucket did.

package boltjournal

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A body of up to inlineMax bytes is in its record's value, a larger one in
// the bodies bucket.
func TestInlineBodyUpToInlineMax(t *testing.T) {
	j, _ := testJournal(t)
	for _, size := range []int{0, 1, inlineMax, inlineMax + 1} {
		rec := pendingRecord("k")
		rec.Key = strings.Repeat("k", size+1)
		rec.Body = bytes.Repeat([]byte("b"), size)
		require.NoError(t, j.insert(rec, false))
		require.NoError(t, j.view(func(tx *bolt.Tx) error {
			v := tx.Bucket(bucketPending).Get(idKey(seqOf(rec)))
			require.Equal(t, size <= inlineMax, hasInlineBody(v), "size %d", size)
			require.Equal(t, size > inlineMax, tx.Bucket(bucketBodies).Get(idKey(seqOf(rec))) != nil, "size %d", size)
			return nil
		}))
		got, err := j.Reload(context.Background(), rec)
		require.NoError(t, err)
		require.Equal(t, len(rec.Body), len(got.Body))
		require.True(t, got.BodyMatches())
	}
}

// Through every state change a body stays where a record that needs it can
// read it: a pending update, a give-up that fails the record, its repend;
// a settle drops it with the record's value.
func TestInlineBodyCarriedOverStateChanges(t *testing.T) {
	j, _ := testJournal(t)
	ctx := context.Background()
	rec := pendingRecord("k")
	rec.OperationID = "op"
	rec.Body = []byte(`{"amount":4200}`)
	require.NoError(t, j.insert(rec, false))
	requireBody := func(why string) {
		t.Helper()
		j = reopen(t, j) // read from the file, past every overlay
		got, err := j.Lookup("op")
		require.NoError(t, err)
		require.Equal(t, rec.Body, got.Body, why)
	}

	rec.Attempts, rec.NextAttempt, rec.Updated = 1, time.Now().Add(time.Minute), time.Now()
	require.NoError(t, j.Update(ctx, rec, journal.Deferred))
	requireBody("a pending update")

	rec.State, rec.LastError = StateFailed, "idem: unsupported protocol scheme"
	require.NoError(t, j.Update(ctx, rec, journal.Deferred))
	requireBody("failed, in the done bucket")

	rec.State = StatePending
	require.NoError(t, j.Update(ctx, rec, journal.Durable))
	requireBody("made pending again")

	rec.State, rec.Status = StateSettled, 201
	require.NoError(t, j.Update(ctx, rec, journal.Durable))
	j = reopen(t, j)
	got, err := j.Lookup("op")
	require.NoError(t, err)
	require.Nil(t, got.Body, "a settled record keeps no body")
}

// A value whose inline body does not match its length trailer is a damaged
// file: a clear error, never a panic or another body.
func TestInlineBodyDamagedTrailer(t *testing.T) {
	j, path := testJournal(t)
	rec := &Record{Key: "k", OperationID: "op", Method: http.MethodPost, URL: "http://127.0.0.1/payments",
		Body: []byte(`{"amount":1}`), State: StatePending, Created: time.Now(), Updated: time.Now()}
	require.NoError(t, j.insert(rec, false))
	require.NoError(t, j.Close())
	tamper(t, path, "op", func(tx *bolt.Tx, id []byte) {
		v := bytes.Clone(tx.Bucket(bucketPending).Get(id))
		copy(v[len(v)-4:], []byte{0xff, 0xff, 0xff, 0xff}) // a body longer than the value, or than an int
		require.NoError(t, tx.Bucket(bucketPending).Put(id, v))
	})
	j, err := Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	_, err = j.Lookup("op")
	require.ErrorIs(t, err, journal.ErrCorrupt)
}
