// Tests for journal.go against damaged and foreign files: never a panic or a
// hang, always ErrJournalCorrupt naming the path.

package idem

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

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// goodJournalFile writes a journal with enough records to span many pages,
// closes it, and returns its bytes and its high-water mark (the bytes its
// pages should cover).
func goodJournalFile(tb testing.TB) ([]byte, int64) {
	tb.Helper()
	j, path := testJournal(tb)
	for i := range 60 {
		rec := &Record{Key: newTestKey(tb), Method: http.MethodPost, URL: "http://127.0.0.1/p",
			Body: bytes.Repeat([]byte{'a' + byte(i%26)}, 3000), State: StatePending, Created: time.Now(), Updated: time.Now()}
		require.NoError(tb, insertRec(j, rec, true))
	}
	require.NoError(tb, j.Close())
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(tb, err)
	var hw int64
	require.NoError(tb, db.View(func(tx *bolt.Tx) error { hw = tx.Size(); return nil }))
	require.NoError(tb, db.Close())
	raw, err := os.ReadFile(path)
	require.NoError(tb, err)
	return raw, hw
}

func newTestKey(tb testing.TB) string {
	tb.Helper()
	k, err := newKey()
	require.NoError(tb, err)
	return k
}

func TestJournalCorruptFiles(t *testing.T) {
	good, hw := goodJournalFile(t)
	require.Greater(t, hw, int64(64<<10), "the sample journal should span many pages")
	random := make([]byte, 64<<10)
	rand.Read(random)

	foreign := func(tb testing.TB, path string) {
		db, err := bolt.Open(path, 0o600, nil)
		require.NoError(tb, err)
		require.NoError(tb, db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("users"))
			if err != nil {
				return err
			}
			return b.Put([]byte("alice"), []byte("admin"))
		}))
		require.NoError(tb, db.Close())
	}
	otherVersion := func(tb testing.TB, path string) {
		j, err := OpenJournal(path, nil)
		require.NoError(tb, err)
		require.NoError(tb, boltDB(j).Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaVersion, []byte("idem-journal-99"))
		}))
		require.NoError(tb, j.Close())
	}
	write := func(b []byte) func(testing.TB, string) {
		return func(tb testing.TB, path string) { require.NoError(tb, os.WriteFile(path, b, 0o600)) }
	}
	tests := []struct {
		name string
		make func(tb testing.TB, path string)
	}{
		{"random bytes", write(random)},
		{"a few random bytes", write(random[:100])},
		{"zero-filled", write(make([]byte, 64<<10))},
		{"truncated inside the meta pages", write(good[:6000])},
		{"truncated after the meta pages", write(good[:8193])},
		{"truncated to three pages", write(good[:3*4096])},
		{"truncated to half", write(good[:hw/2])},
		{"truncated by one byte", write(good[:hw-1])},
		{"a bbolt file that is not a journal", foreign},
		{"a journal of another version", otherVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.journal")
			tt.make(t, path)
			for _, open := range []struct {
				name string
				fn   func() (*Journal, error)
			}{
				{"OpenJournal", func() (*Journal, error) {
					return OpenJournal(path, &JournalOptions{OpenTimeout: 200 * time.Millisecond})
				}},
				// Again: a failed open must not keep the file locked.
				{"OpenJournal again", func() (*Journal, error) {
					return OpenJournal(path, &JournalOptions{OpenTimeout: 200 * time.Millisecond})
				}},
				{"OpenJournalReadOnly", func() (*Journal, error) { return OpenJournalReadOnly(path, 200*time.Millisecond) }},
				{"Open", func() (*Journal, error) {
					c, err := Open(path, &Options{Journal: JournalOptions{OpenTimeout: 200 * time.Millisecond}})
					if err != nil {
						return nil, err
					}
					return c.Journal(), nil
				}},
			} {
				j, err := open.fn()
				if j != nil {
					j.Close()
				}
				require.ErrorIs(t, err, ErrJournalCorrupt, open.name)
				require.Contains(t, err.Error(), path, open.name)
			}
		})
	}
}

func TestJournalTruncatedAnywhere(t *testing.T) {
	// Wherever a copy or a full disk cut the file, opening it must report
	// ErrJournalCorrupt: bbolt faults (SIGBUS) on mapped pages past the end of
	// the file, which would otherwise kill the process.
	good, hw := goodJournalFile(t)
	dir := t.TempDir()
	for size := int64(2 * 4096); size < hw; size += 4096 {
		path := filepath.Join(dir, fmt.Sprintf("cut-%d.journal", size))
		require.NoError(t, os.WriteFile(path, good[:size], 0o600))
		j, err := OpenJournal(path, &JournalOptions{OpenTimeout: 100 * time.Millisecond})
		if j != nil {
			j.Close()
		}
		require.ErrorIs(t, err, ErrJournalCorrupt, "cut at %d of %d bytes", size, hw)
		ro, err := OpenJournalReadOnly(path, 100*time.Millisecond)
		if ro != nil {
			ro.Close()
		}
		require.ErrorIs(t, err, ErrJournalCorrupt, "read-only, cut at %d of %d bytes", size, hw)
	}
}

func TestJournalBadRecordIsCorruptNotPanic(t *testing.T) {
	j, path := testJournal(t)
	rec := &Record{Key: "k-1", OperationID: "op-1", Method: http.MethodPost, URL: "http://127.0.0.1/p",
		State: StatePending, Created: time.Now(), Updated: time.Now()}
	require.NoError(t, insertRec(j, rec, true))
	require.NoError(t, boltDB(j).Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPending).Put(idKey(seqOf(rec)), []byte("{not json")); err != nil {
			return err
		}
		return tx.Bucket(bucketDone).Put(idKey(seqOf(rec)+1), []byte(`{"state":"settled?"}`))
	}))

	_, err := j.Records()
	require.ErrorIs(t, err, ErrJournalCorrupt)
	require.Contains(t, err.Error(), path)
	_, err = j.Lookup("op-1")
	require.ErrorIs(t, err, ErrJournalCorrupt)
	_, err = j.Prune(time.Hour)
	require.ErrorIs(t, err, ErrJournalCorrupt)
	tr, err := NewTransport(j, nil)
	require.NoError(t, err)
	require.ErrorIs(t, tr.Resume(context.Background(), nil), ErrJournalCorrupt)
}

func TestJournalEmptyFileBecomesJournal(t *testing.T) {
	// A zero-length file is what os.Create or touch leaves: a new journal,
	// not a damaged one.
	path := filepath.Join(t.TempDir(), "empty.journal")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	j, err := OpenJournal(path, nil)
	require.NoError(t, err)
	recs, err := j.Records()
	require.NoError(t, err)
	require.Empty(t, recs)
	require.NoError(t, j.Close())
}
