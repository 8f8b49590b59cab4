package boltjournal

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The file keeps its newest time rounded up to writtenStep, written once a
// step however many commits a step holds: reopened, LatestWritten is never
// before the newest record, and at most a step after it.
func TestWrittenIsKeptRoundedUp(t *testing.T) {
	j, _ := testJournal(t)
	base := time.Date(2026, 12, 2, 10, 0, 0, 300_000_000, time.UTC)
	var newest time.Time
	for i := range 20 {
		rec := pendingRecord("k" + string(rune('a'+i)))
		rec.Created = base.Add(time.Duration(i) * 10 * time.Millisecond) // all within one step
		require.NoError(t, j.Create(context.Background(), rec))
		newest = rec.Written()
	}
	require.True(t, newest.Equal(j.LatestWritten()), "in the process, the exact newest time: %v, want %v", j.LatestWritten(), newest)
	stored := j.fileWritten.Load()
	require.Equal(t, base.Truncate(time.Second).Add(time.Second).UnixNano(), stored, "rounded up to the next whole step")

	j = reopen(t, j)
	lw := j.LatestWritten()
	require.False(t, lw.Before(newest), "reopened: %v is before the newest record %v", lw, newest)
	require.LessOrEqual(t, lw.Sub(newest), time.Duration(writtenStep))
}

// The newest time survives a reopen, and a file written before it was kept
// is scanned for it once at open. It is not the time of the last record of
// either bucket: the first operation settles last.
func TestWrittenScannedWhenMissing(t *testing.T) {
	j, path := testJournal(t)
	newest := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	var recs []*Record
	for i, at := range []time.Time{newest.Add(-2 * time.Hour), newest.Add(-time.Hour)} {
		rec := &Record{Key: fmt.Sprintf("key-%d", i), Method: http.MethodPost, URL: "https://pay.example/payments",
			Body: []byte("{}"), Created: at, Updated: at, State: StatePending, CallerKey: true}
		require.NoError(t, j.Create(context.Background(), rec))
		recs = append(recs, rec)
	}
	recs[1].State, recs[1].Updated = StateSettled, newest.Add(-30*time.Minute)
	require.NoError(t, j.Update(context.Background(), recs[1], journal.Deferred))
	recs[0].State, recs[0].Updated = StateSettled, newest
	require.NoError(t, j.Update(context.Background(), recs[0], journal.Deferred))

	j = reopen(t, j)
	require.Equal(t, newest, j.LatestWritten().UTC(), "the first operation's settle")
	require.NoError(t, j.Close())

	// As a file written before the time was kept: scanned once at open.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		require.Equal(t, binary.BigEndian.AppendUint64(nil, uint64(newest.UnixNano())), meta.Get(metaWritten),
			"kept by the commits, not found by a scan")
		return meta.Delete(metaWritten)
	}))
	require.NoError(t, db.Close())
	j, err = Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	require.Equal(t, newest, j.LatestWritten().UTC(), "found by scanning the records")
}
