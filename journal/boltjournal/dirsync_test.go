// Tests that a writer Open fsyncs the journal's directory (dirsync.go).

package boltjournal

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordDirSyncs replaces syncDir for the test with one that records each
// directory and returns err.
func recordDirSyncs(t *testing.T, err error) func() []string {
	var mu sync.Mutex
	var dirs []string
	old := syncDir
	syncDir = func(dir string) error {
		mu.Lock()
		defer mu.Unlock()
		dirs = append(dirs, dir)
		return err
	}
	t.Cleanup(func() { syncDir = old })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), dirs...)
	}
}

// Creating a journal fsyncs its directory before Open returns, and so does
// every later writer Open (an Open that created the file may have died
// before its sync); a read-only open writes nothing and syncs nothing.
func TestOpenSyncsJournalDirectory(t *testing.T) {
	synced := recordDirSyncs(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "idem.journal")

	j, err := Open(path, nil)
	require.NoError(t, err)
	require.Equal(t, []string{dir}, synced(), "creating the file syncs its directory")
	require.NoError(t, j.Close())

	r, err := OpenReadOnly(path, 0)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Len(t, synced(), 1, "a read-only open syncs nothing")

	// A relative path names the directory it resolves to.
	t.Chdir(dir)
	j, err = Open("idem.journal", nil)
	require.NoError(t, err)
	require.NoError(t, j.Close())
	require.Equal(t, []string{dir, dir}, synced())
}

// A directory that cannot be synced fails the Open, naming the journal,
// and leaves the path free for the next Open; a file system that does not
// fsync directories at all (EINVAL) is taken at its word.
func TestOpenFailsWhenDirectorySyncFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	recordDirSyncs(t, syscall.EIO)
	_, err := Open(path, nil)
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorContains(t, err, path)

	recordDirSyncs(t, &os.PathError{Op: "sync", Path: filepath.Dir(path), Err: syscall.EINVAL})
	j, err := Open(path, nil)
	require.NoError(t, err, "the failed Open released the path and the file")
	require.NoError(t, j.Close())
}

// The real sync works on a journal's directory here.
func TestSyncDirFS(t *testing.T) {
	require.NoError(t, syncDirFS(t.TempDir()))
	err := syncDirFS(filepath.Join(t.TempDir(), "missing"))
	if dirSyncable {
		require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
	}
}
