// Tests for notjournal.go: a file that is not a journal at all is refused
// with ErrNotJournal (and still journal.ErrCorrupt); a damaged journal is
// ErrCorrupt but not ErrNotJournal; the file is left as it was.

package boltjournal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestNotJournalIsToldFromCorrupt(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	text := write("text", []byte("hello, not a journal\n"))
	tiny := write("tiny", []byte("hi"))
	other := filepath.Join(dir, "other.db") // another program's bbolt file
	db, err := bolt.Open(other, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err }))
	require.NoError(t, db.Close())

	_, path := testJournal(t)
	damaged, err := os.ReadFile(path)
	require.NoError(t, err)
	damaged[metaOffset+20] ^= 0xff // both meta pages' checksums fail
	_, pageSize := metaPages(t, path)
	damaged[pageSize+metaOffset+20] ^= 0xff
	corrupt := write("corrupt", damaged)

	for _, p := range []string{text, tiny, other} {
		before, err := os.ReadFile(p)
		require.NoError(t, err)
		_, err = OpenReadOnly(p, 0)
		require.ErrorIs(t, err, ErrNotJournal, p)
		require.ErrorIs(t, err, journal.ErrCorrupt, p)
		require.ErrorContains(t, err, p+" is not an idem journal")
		_, err = Open(p, nil)
		require.ErrorIs(t, err, ErrNotJournal, p)
		after, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, before, after, "%s must be left as it was", p)
	}
	empty := write("empty", nil)
	_, err = OpenReadOnly(empty, 0)
	require.ErrorIs(t, err, ErrNotJournal)
	require.ErrorContains(t, err, empty+" is not an idem journal (an empty file)")
	fi, err := os.Stat(empty)
	require.NoError(t, err)
	require.Zero(t, fi.Size(), "a reader leaves an empty file empty")

	_, err = OpenReadOnly(corrupt, 0)
	require.ErrorIs(t, err, journal.ErrCorrupt)
	require.NotErrorIs(t, err, ErrNotJournal)
}
