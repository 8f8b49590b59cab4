package boltjournal

import (
	"os"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/stretchr/testify/require"
)

// grownJournal returns the path of a closed journal whose file was extended
// to size bytes (zeros past bbolt's pages, which it ignores).
func grownJournal(t *testing.T, size int64) string {
	t.Helper()
	j, path := testJournal(t)
	require.NoError(t, j.Close())
	require.NoError(t, os.Truncate(path, size))
	return path
}

func TestWarmCacheReadsTheWholeFile(t *testing.T) {
	const size = 2 * warmMin
	path := grownJournal(t, size)
	j, err := Open(path, nil)
	require.NoError(t, err)
	defer j.Close()
	for deadline := time.Now().Add(5 * time.Second); j.warmed.Load() < size && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, size, j.warmed.Load(), "read once, to the end")
}

func TestWarmCacheSkipsSmallFiles(t *testing.T) {
	j, _ := testJournal(t)
	j.warming.Wait()
	require.Zero(t, j.warmed.Load())
}

func TestCloseStopsWarmingCache(t *testing.T) {
	path := grownJournal(t, 1<<30)
	leakcheck.Check(t)
	j, err := Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, j.Close())
	require.Less(t, j.warmed.Load(), int64(1<<30), "stopped before the end")
}
