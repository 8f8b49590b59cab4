// Tests for notjournal.go: a file that is not a journal at all is refused
// with ErrNotJournal (and still journal.ErrCorrupt); a damaged journal is
// ErrCorrupt but not ErrNotJournal, also with both meta pages gone; the file
// is left as it was.

package boltjournal

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// zeroMetas zeroes the first two pages of the file at path: bbolt's two meta
// pages, for a file of page size ps.
func zeroMetas(tb testing.TB, path string, ps int64) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(tb, err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, 2*ps), 0)
	require.NoError(tb, err)
}

// requireRefused asserts that every opener refuses the file at path with
// journal.ErrCorrupt naming it, as a journal (notJournal false) or as
// ErrNotJournal, and leaves the file as it was; it returns the error.
func requireRefused(tb testing.TB, path string, notJournal bool) error {
	tb.Helper()
	before, err := os.ReadFile(path)
	require.NoError(tb, err)
	var last error
	for _, open := range []func() (*Journal, error){
		func() (*Journal, error) { return Open(path, &Options{OpenTimeout: 200 * time.Millisecond}) },
		func() (*Journal, error) { return OpenReadOnly(path, 200*time.Millisecond) },
	} {
		j, err := open()
		if j != nil {
			j.Close()
		}
		require.ErrorIs(tb, err, journal.ErrCorrupt)
		require.ErrorContains(tb, err, path)
		if notJournal {
			require.ErrorIs(tb, err, ErrNotJournal)
		} else {
			require.NotErrorIs(tb, err, ErrNotJournal)
		}
		last = err
	}
	after, err := os.ReadFile(path)
	require.NoError(tb, err)
	require.True(tb, bytes.Equal(before, after), "%s must be left as it was", path)
	return last
}

// A journal holding pending operations, its two meta pages zeroed (the page
// size read from the file first): bbolt cannot open it, but its data pages
// still hold idem's buckets, so it is a damaged journal, not "not an idem
// journal": the error names the path, says the file may hold pending
// operations and must be kept, and names the ways to recover.
func TestBothMetaPagesLostIsDamaged(t *testing.T) {
	j, path := testJournal(t)
	for i := range 40 {
		now := time.Now()
		require.NoError(t, j.Create(context.Background(), &Record{Key: fmt.Sprintf("k-%d", i), OperationID: fmt.Sprintf("op-%d", i),
			Method: http.MethodPost, URL: "http://127.0.0.1/payments", Body: bytes.Repeat([]byte{'x'}, 900),
			State: StatePending, Created: now, Updated: now}))
	}
	require.NoError(t, j.Close())
	_, ps := metaPages(t, path)
	zeroMetas(t, path, ps)

	err := requireRefused(t, path, false)
	require.ErrorContains(t, err, path+" is an idem journal whose two bbolt meta pages are both damaged")
	require.ErrorContains(t, err, "may hold pending operations")
	require.ErrorContains(t, err, "Keep the file")
	require.ErrorContains(t, err, "surgery meta update")
	require.ErrorContains(t, err, fmt.Sprintf("(page size %d)", ps))
}

// The same with bbolt's largest common page size (64 KiB): idem's buckets
// are found without the meta pages' word for the page size.
func TestBothMetaPagesLostOtherPageSize(t *testing.T) {
	const ps = 1 << 16
	path := filepath.Join(t.TempDir(), "big-pages.journal")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: ps})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		for _, name := range append(journalBuckets, bucketMeta) {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketPending).Put([]byte("k"), bytes.Repeat([]byte{'x'}, 3*ps))
	}))
	require.NoError(t, db.Close())
	zeroMetas(t, path, ps)
	require.ErrorContains(t, requireRefused(t, path, false), fmt.Sprintf("(page size %d)", ps))
}

// Files of a journal's size that are not journals, their first two pages
// zeroed too, are still not journals: random bytes, random bytes with idem's
// bucket names written in them (not in a bbolt page), and bbolt files of
// another program, one of them with some of idem's bucket names.
func TestBothMetaPagesLostForeignStaysNotJournal(t *testing.T) {
	j, path := testJournal(t)
	for i := range 40 {
		now := time.Now()
		require.NoError(t, j.Create(context.Background(), &Record{Key: fmt.Sprintf("k-%d", i),
			Method: http.MethodPost, URL: "http://127.0.0.1/payments", Body: bytes.Repeat([]byte{'x'}, 900),
			State: StatePending, Created: now, Updated: now}))
	}
	require.NoError(t, j.Close())
	_, ps := metaPages(t, path)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	size := fi.Size()
	dir := t.TempDir()

	random := make([]byte, size)
	rand.Read(random)
	names := bytes.Clone(random)
	for off := 2 * int(ps); off+64 < len(names); off += 1024 {
		copy(names[off:], "bodies\x00done\x00index\x00meta\x00pending")
	}
	foreign := func(name string, buckets ...string) string {
		p := filepath.Join(dir, name)
		db, err := bolt.Open(p, 0o600, nil)
		require.NoError(t, err)
		require.NoError(t, db.Update(func(tx *bolt.Tx) error {
			for _, b := range buckets {
				bk, err := tx.CreateBucket([]byte(b))
				if err != nil {
					return err
				}
				for i := range 60 {
					if err := bk.Put(fmt.Appendf(nil, "%s-%d", b, i), bytes.Repeat([]byte{'y'}, 900)); err != nil {
						return err
					}
				}
			}
			return nil
		}))
		require.NoError(t, db.Close())
		return p
	}
	files := map[string]string{
		"random":                    filepath.Join(dir, "random"),
		"random with bucket names":  filepath.Join(dir, "names"),
		"another program's bbolt":   foreign("users.db", "users", "sessions"),
		"a to-do list's bbolt file": foreign("todo.db", "pending", "done"),
	}
	require.NoError(t, os.WriteFile(files["random"], random, 0o600))
	require.NoError(t, os.WriteFile(files["random with bucket names"], names, 0o600))
	for name, p := range files {
		t.Run(name, func(t *testing.T) {
			zeroMetas(t, p, ps)
			require.ErrorContains(t, requireRefused(t, p, true), p+" is not an idem journal")
		})
	}
}
