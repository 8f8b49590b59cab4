// Tests for meta.go: a journal with one damaged meta page is refused
// instead of opened one commit older, until the older commit is accepted on
// purpose; a truncated file gives the same error to a writer and a reader.

package boltjournal

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// metaPages reads the two meta pages of the closed journal at path, and
// returns them with the file's page size.
func metaPages(tb testing.TB, path string) ([2]metaPage, int64) {
	tb.Helper()
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	m0 := readMeta(f, 0)
	require.NoError(tb, m0.err)
	return [2]metaPage{m0, readMeta(f, int64(m0.pageSize))}, int64(m0.pageSize)
}

// damageMeta flips one byte of meta page i's root bucket field, which its
// checksum covers.
func damageMeta(tb testing.TB, path string, i int, pageSize int64) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(tb, err)
	defer f.Close()
	off := int64(i)*pageSize + metaOffset + 16
	var b [1]byte
	_, err = f.ReadAt(b[:], off)
	require.NoError(tb, err)
	b[0] ^= 0x01
	_, err = f.WriteAt(b[:], off)
	require.NoError(tb, err)
}

func insertOp(tb testing.TB, j *Journal, op string) {
	tb.Helper()
	rec := &Record{Key: "k-" + op, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/payments",
		Body: []byte(`{"amount":100}`), State: StatePending, Created: time.Now(), Updated: time.Now()}
	require.NoError(tb, j.insert(rec, true))
}

// The newest commit is the write-ahead of an operation (the server may
// have it). With its meta page damaged, bbolt would open the commit before,
// where the operation does not exist: every open refuses the file, naming
// it and the page, until AcceptOlderCommit; after it the file opens as of
// the older commit, on purpose. Damage to the older page is refused too:
// the file cannot say which of the two it was.
func TestDamagedMetaPageRefused(t *testing.T) {
	for _, which := range []string{"newer", "older"} {
		t.Run(which, func(t *testing.T) {
			j, path := testJournal(t)
			insertOp(t, j, "op-1")
			j = reopen(t, j)
			insertOp(t, j, "op-2") // the newest commit
			require.NoError(t, j.Close())

			m, pageSize := metaPages(t, path)
			newer := 0
			if m[1].txid > m[0].txid {
				newer = 1
			}
			page := newer
			if which == "older" {
				page = 1 - newer
			}
			damageMeta(t, path, page, pageSize)

			opens := map[string]func() (*Journal, error){
				"Open":         func() (*Journal, error) { return Open(path, nil) },
				"OpenReadOnly": func() (*Journal, error) { return OpenReadOnly(path, 0) },
				// idem.Open (a Client): TestDamagedMetaPageRefusedByClient in
				// the idem package.
			}
			for name, open := range opens {
				got, err := open()
				if got != nil {
					got.Close()
				}
				require.ErrorIs(t, err, journal.ErrCorrupt, name)
				require.ErrorContains(t, err, path, name)
				var meta *MetaPageError
				require.ErrorAs(t, err, &meta, name)
				require.Equal(t, page, meta.Page, name)
				require.Equal(t, m[1-page].txid, meta.Commit, name)
				require.ErrorIs(t, err, berrors.ErrChecksum, name)
			}

			damage, err := AcceptOlderCommit(path, 0)
			require.NoError(t, err)
			require.NotNil(t, damage)
			require.Equal(t, page, damage.Page)
			again, err := AcceptOlderCommit(path, 0)
			require.NoError(t, err)
			require.Nil(t, again, "both meta pages are intact now")

			j, err = Open(path, nil)
			require.NoError(t, err)
			defer j.Close()
			rec, err := j.Lookup("op-1")
			require.NoError(t, err)
			require.NotNil(t, rec)
			rec, err = j.Lookup("op-2")
			require.NoError(t, err)
			if which == "newer" {
				require.Nil(t, rec, "accepted: the file is as of the commit before op-2's write-ahead")
			} else {
				require.NotNil(t, rec, "the damaged page was the older one: nothing lost")
			}
		})
	}
}

// A journal whose intact meta page is from the file's creation (commit 0 or
// 1, as a crash while bbolt set up a new file leaves it) held no operation:
// it opens.
func TestDamagedMetaPageAtCreationOpens(t *testing.T) {
	for page := range 2 {
		t.Run(fmt.Sprint("page ", page), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idem.journal")
			db, err := bolt.Open(path, 0o600, nil) // writes commits 0 and 1, nothing else
			require.NoError(t, err)
			require.NoError(t, db.Close())
			_, pageSize := metaPages(t, path)
			damageMeta(t, path, page, pageSize)

			j, err := Open(path, nil)
			require.NoError(t, err)
			insertOp(t, j, "op-1")
			require.NoError(t, j.Close())
		})
	}
}

// AcceptOlderCommit needs the file to itself.
func TestAcceptOlderCommitLocked(t *testing.T) {
	j, path := testJournal(t)
	_, err := AcceptOlderCommit(path, 50*time.Millisecond)
	require.ErrorIs(t, err, journal.ErrLocked)
	require.NoError(t, j.Close())
	damage, err := AcceptOlderCommit(path, 0)
	require.NoError(t, err)
	require.Nil(t, damage)
}

// Cut anywhere, a journal gives a writer Open and a read-only open the same
// error: journal.ErrCorrupt, matching io.ErrUnexpectedEOF, naming the path.
// (A writer Open used to read the file's freelist past its end and fault;
// the fault was recovered as a nil dereference.)
func TestTruncatedJournalSameErrorForWriterAndReader(t *testing.T) {
	good, hw := goodJournalFile(t)
	ps := int64(4096)
	dir := t.TempDir()
	for _, size := range []int64{1, 79, 100, ps - 1, ps, ps + 1, ps + 100, 2*ps - 1, 2 * ps, 2*ps + 1,
		3 * ps, hw / 2, hw - ps, hw - 1} {
		path := filepath.Join(dir, fmt.Sprintf("cut-%d.journal", size))
		require.NoError(t, os.WriteFile(path, good[:size], 0o600))
		w, werr := Open(path, &Options{OpenTimeout: 100 * time.Millisecond})
		if w != nil {
			w.Close()
		}
		require.NoError(t, os.WriteFile(path, good[:size], 0o600)) // as it was, whatever the writer did
		r, rerr := OpenReadOnly(path, 100*time.Millisecond)
		if r != nil {
			r.Close()
		}
		for name, err := range map[string]error{"writer": werr, "reader": rerr} {
			require.ErrorIs(t, err, journal.ErrCorrupt, "%s, cut at %d of %d bytes", name, size, hw)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF, "%s, cut at %d of %d bytes: %v", name, size, hw, err)
			require.ErrorContains(t, err, path)
		}
		require.Equal(t, rerr.Error(), werr.Error(), "cut at %d", size)
	}
	require.True(t, errors.Is(errTruncated("p", 1, 2), io.ErrUnexpectedEOF))
}
