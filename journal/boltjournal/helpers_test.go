package boltjournal

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/memtest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// testJournal opens a journal in a fresh temporary directory, closed at the
// end of the test.
func testJournal(tb testing.TB) (*Journal, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "idem.journal")
	j, err := Open(path, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { j.Close() })
	return j, path
}

// reopen closes j and opens the journal at the same path again, as a
// restarted process would. The new journal closes with the test.
func reopen(tb testing.TB, j *Journal) *Journal {
	tb.Helper()
	require.NoError(tb, j.Close())
	j2, err := Open(j.Path(), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { j2.Close() })
	return j2
}

// fastJournal is testJournal on a RAM file system when there is one
// (/dev/shm), for tests about concurrency rather than durability: there an
// fsync costs nothing, so a thousand commits do not dominate the run.
func fastJournal(tb testing.TB) *Journal {
	tb.Helper()
	dir := tb.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if shm, err := os.MkdirTemp("/dev/shm", "idem-test-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(shm) })
			dir = shm
		}
	}
	j, err := Open(filepath.Join(dir, "idem.journal"), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { j.Close() })
	return j
}

// newKey32 returns a random AES-256 key.
func newKey32(tb testing.TB) []byte {
	tb.Helper()
	k := make([]byte, KeySize)
	_, err := rand.Read(k)
	require.NoError(tb, err)
	return k
}

// goodJournalFile writes a journal with enough records to span many pages,
// closes it, and returns its bytes and its high-water mark (the bytes its
// pages should cover).
func goodJournalFile(tb testing.TB) ([]byte, int64) {
	tb.Helper()
	j, path := testJournal(tb)
	for i := range 60 {
		rec := &Record{Key: fmt.Sprintf("good-%d-%x", i, newKey32(tb)[:8]), Method: http.MethodPost, URL: "http://127.0.0.1/p",
			Body: bytes.Repeat([]byte{'a' + byte(i%26)}, 3000), State: StatePending, Created: time.Now(), Updated: time.Now()}
		require.NoError(tb, j.insert(rec, true))
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

// journalVersion reads the version a closed journal file records.
func journalVersion(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	var v string
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		v = string(tx.Bucket(bucketMeta).Get(metaVersion))
		return nil
	}))
	return v
}

// tamper changes the stored record of operation op, in a closed journal.
func tamper(t *testing.T, path, op string, change func(tx *bolt.Tx, id []byte)) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketIndex).Get([]byte("o\x00" + op))
		require.NotNil(t, id)
		change(tx, bytes.Clone(id))
		return nil
	}))
}

// editMeta rewrites a pending record's stored metadata through its JSON
// form, which the journal still reads.
func editMeta(t *testing.T, tx *bolt.Tx, id []byte, edit func(m map[string]any)) {
	b := tx.Bucket(bucketPending)
	var m map[string]any
	old, err := metaJSON(b.Get(id))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(old, &m))
	body := storedBodyTx(tx, id) // a JSON record keeps its body in the bodies bucket
	edit(m)
	v, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, b.Put(id, v))
	if body != nil {
		require.NoError(t, tx.Bucket(bucketBodies).Put(id, body))
	}
}

// flipLast returns a copy of b with its last byte altered.
func flipLast(b []byte) []byte {
	b = bytes.Clone(b)
	b[len(b)-1] ^= 0x01
	return b
}

// peakDuring is memtest.PeakDuring.
var peakDuring = memtest.PeakDuring

// pendingAfter reads a page of a listing (readPending) and decodes it whole.
func (j *Journal) pendingAfter(after uint64, n int) ([]*Record, error) {
	page, gen, _, err := j.readPending(after, n, nil)
	if err != nil {
		return nil, err
	}
	recs := make([]*Record, len(page))
	for i, l := range page {
		if recs[i], err = j.listedRecord(l, gen); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// holdCommits keeps anything from being committed (the commit loop waits
// before its next commit) until the returned function is called: deferred
// state changes stay deferred, and a write waits.
func (j *Journal) holdCommits() (release func()) {
	c := &j.commit
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.held = false
		c.idle.Broadcast()
		c.mu.Unlock()
	}
}

// metaJSON returns stored metadata in the JSON form of journals before
// version 10 (record_parse.go reads it).
func metaJSON(meta []byte) ([]byte, error) {
	s, err := unmarshalStored(meta)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// recordValue returns record id's stored value and the bucket holding it.
func recordValue(tx *bolt.Tx, id []byte) (*bolt.Bucket, []byte) {
	for _, name := range [][]byte{bucketPending, bucketDone} {
		if v := tx.Bucket(name).Get(id); v != nil {
			return tx.Bucket(name), v
		}
	}
	return nil, nil
}

// storedBodyTx returns record id's body as stored: inline or in the bodies
// bucket.
func storedBodyTx(tx *bolt.Tx, id []byte) []byte {
	if _, v := recordValue(tx, id); hasInlineBody(v) {
		_, body, _, _ := splitInline(v)
		return bytes.Clone(body)
	}
	return getBody(tx.Bucket(bucketBodies), id)
}

// setStoredBodyTx replaces record id's body where it is stored, or deletes it
// for nil, as damage to the file would.
func setStoredBodyTx(tx *bolt.Tx, id, body []byte) error {
	b, v := recordValue(tx, id)
	if !hasInlineBody(v) {
		if body == nil {
			return deleteBody(tx.Bucket(bucketBodies), id)
		}
		return tx.Bucket(bucketBodies).Put(id, body)
	}
	meta, _, _, _ := splitInline(v)
	if body == nil {
		meta = bytes.Clone(meta)
		meta[1] &^= flagInline
		return b.Put(id, meta)
	}
	return b.Put(id, withBody(meta, body))
}
