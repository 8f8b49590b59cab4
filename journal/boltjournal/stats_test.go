package boltjournal

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Stats counts the pages the journal's commits wrote: a write-ahead writes
// at least its leaf, the bucket list and a meta page.
func TestStatsCountsPagesWritten(t *testing.T) {
	j, _ := testJournal(t)
	before := j.Stats()
	require.NoError(t, j.Create(context.Background(), pendingRecord("k1")))
	after := j.Stats()
	require.Equal(t, before.Commits+1, after.Commits)
	require.GreaterOrEqual(t, after.PagesWritten-before.PagesWritten, uint64(3))
}
