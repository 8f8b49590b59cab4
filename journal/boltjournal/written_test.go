package boltjournal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
