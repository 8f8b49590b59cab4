package boltjournal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Stats counts the pages the journal's commits wrote: a write-ahead writes
// at least its leaf, the bucket list and a meta page. It times the commit,
// and the writing and syncing within it.
func TestStatsCountsPagesWritten(t *testing.T) {
	j, _ := testJournal(t)
	before := j.Stats()
	start := time.Now()
	require.NoError(t, j.Create(context.Background(), pendingRecord("k1")))
	took := time.Since(start)
	after := j.Stats()
	require.Equal(t, before.Commits+1, after.Commits)
	require.GreaterOrEqual(t, after.PagesWritten-before.PagesWritten, uint64(3))
	commit, write := after.CommitTime-before.CommitTime, after.WriteTime-before.WriteTime
	require.Positive(t, write, "the commit wrote and synced pages")
	require.GreaterOrEqual(t, commit, write, "the write is part of the commit")
	require.LessOrEqual(t, commit, took, "the commit is part of the call")
}
