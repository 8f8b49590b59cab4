// Tests of damaged and foreign files through idem.Open and an idem
// Transport: never a panic or a hang, always journal.ErrCorrupt naming the
// path. The engine's own openers and readers are in bolt_test.go and
// meta_test.go.

package boltjournal_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Open reports a damaged journal file as boltjournal.Open does (boltjournal's
// TestJournalCorruptFiles opens the same files with the engine's own
// openers).
func TestOpenCorruptFiles(t *testing.T) {
	good, hw := boltjournal.GoodJournalFile(t)
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
		j, err := boltjournal.Open(path, nil)
		require.NoError(tb, err)
		require.NoError(tb, j.Close())
		db, err := bolt.Open(path, 0o600, nil)
		require.NoError(tb, err)
		require.NoError(tb, db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("meta")).Put([]byte("version"), []byte("idem-journal-99"))
		}))
		require.NoError(tb, db.Close())
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
			c, err := idem.Open(path, &idem.Options{Journal: boltjournal.Options{OpenTimeout: 200 * time.Millisecond}})
			if c != nil {
				c.Close()
			}
			require.ErrorIs(t, err, journal.ErrCorrupt)
			require.Contains(t, err.Error(), path)
		})
	}
}

// A journal holding pending payments, written through Open and its
// HTTPClient, closed, then both meta pages zeroed (pages 0 and 1, the page
// size read from the file first): Open and boltjournal.OpenReadOnly report it
// damaged, naming the path and saying to keep the file, never "not an idem
// journal", which would invite deleting it. A file of the same size that is
// not a journal, with its first two pages zeroed too, still is "not an idem
// journal".
func TestJournalMetaPagesBothZeroedPending(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "payments.journal")
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1})
	require.NoError(t, err)
	down := "http://" + closedPort(t) + "/payments"
	for i := range 30 {
		ctx := idem.WithOperationID(context.Background(), fmt.Sprintf("charge/%d", i))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, down, strings.NewReader(paymentBody(fmt.Sprint(i), 100)))
		require.NoError(t, err)
		_, err = c.HTTPClient().Do(req)
		pendingErr(t, err)
	}
	n, err := c.Journal().PendingCount(context.Background())
	require.NoError(t, err)
	require.Equal(t, 30, n)
	require.NoError(t, c.Close())
	ps := boltjournal.JournalPageSize(t, path)
	zeroPages := func(path string) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt(make([]byte, 2*ps), 0)
		require.NoError(t, err)
	}
	zeroPages(path)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	foreign := filepath.Join(dir, "foreign.bin")
	random := make([]byte, fi.Size())
	rand.Read(random)
	require.NoError(t, os.WriteFile(foreign, random, 0o600))
	zeroPages(foreign)

	for _, open := range []struct {
		name string
		fn   func(string) error
	}{
		{"Open", func(p string) error {
			c, err := idem.Open(p, &idem.Options{Journal: boltjournal.Options{OpenTimeout: 200 * time.Millisecond}})
			if c != nil {
				c.Close()
			}
			return err
		}},
		{"OpenJournalReadOnly", func(p string) error {
			j, err := boltjournal.OpenReadOnly(p, 200*time.Millisecond)
			if j != nil {
				j.Close()
			}
			return err
		}},
	} {
		err := open.fn(path)
		require.ErrorIs(t, err, journal.ErrCorrupt, open.name)
		require.NotErrorIs(t, err, boltjournal.ErrNotJournal, open.name)
		require.ErrorContains(t, err, path+" is an idem journal whose two bbolt meta pages are both damaged", open.name)
		require.ErrorContains(t, err, "Keep the file", open.name)

		err = open.fn(foreign)
		require.ErrorIs(t, err, boltjournal.ErrNotJournal, open.name)
		require.ErrorContains(t, err, foreign+" is not an idem journal", open.name)
	}
}

// Resume over a journal holding a record that does not parse fails with
// journal.ErrCorrupt (boltjournal's TestJournalBadRecordIsCorruptNotPanic
// has the engine's readers).
func TestJournalBadRecordFailsResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)
	rec := &idem.Record{Key: "k-1", OperationID: "op-1", Method: http.MethodPost, URL: "http://127.0.0.1/p",
		State: idem.StatePending, Created: time.Now(), Updated: time.Now(), CallerKey: true}
	require.NoError(t, j.Create(context.Background(), rec))
	require.NoError(t, j.Close())
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(boltjournal.BucketPending).Put(binary.BigEndian.AppendUint64(nil, boltjournal.RecordID(rec)), []byte("{not json"))
	}))
	require.NoError(t, db.Close())

	j, err = boltjournal.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	tr, err := idem.NewTransport(j, nil)
	require.NoError(t, err)
	require.ErrorIs(t, tr.Resume(context.Background(), nil), journal.ErrCorrupt)
}

// requireCorruptOrNil asserts err is nil or a journal error naming path.
func requireCorruptOrNil(tb testing.TB, err error, path, what string) {
	tb.Helper()
	if err == nil {
		return
	}
	require.ErrorIs(tb, err, journal.ErrCorrupt, what)
	require.Contains(tb, err.Error(), path, what)
}

func TestJournalDataPagesRandom(t *testing.T) {
	t.Parallel()
	// Random bytes over pages past the meta pages, whole or just their
	// headers: bbolt may notice at open, at a read or at a write, or not at
	// all (it has no checksum on data pages). Every call must end with nil
	// or journal.ErrCorrupt naming the path.
	good, hw := boltjournal.GoodJournalFile(t)
	scratch := filepath.Join(t.TempDir(), "probe.journal")
	require.NoError(t, os.WriteFile(scratch, good, 0o600))
	ps := int64(boltjournal.JournalPageSize(t, scratch))
	pages := hw / ps
	srv := startPayments(t, nil)
	seeds := 24
	if testing.Short() {
		seeds = 8
	}
	corrupt := map[string]int{} // by the call that first said so
	for seed := range seeds {
		rng := mrand.New(mrand.NewPCG(uint64(seed), 7))
		b := bytes.Clone(good)
		span := ps
		if seed%2 == 1 {
			span = 16 // a page header: id, flags, count, overflow
		}
		for range 1 + rng.IntN(3) {
			p := 2 + rng.Int64N(pages-2)
			for i := p * ps; i < p*ps+span; i++ {
				b[i] = byte(rng.Uint32())
			}
		}
		path := filepath.Join(t.TempDir(), fmt.Sprintf("seed-%d.journal", seed))
		require.NoError(t, os.WriteFile(path, b, 0o600))
		first := ""
		check := func(err error, what string) {
			t.Helper()
			requireCorruptOrNil(t, err, path, what)
			if err != nil && first == "" {
				first = what
			}
		}
		boltjournal.WithDeadline(t, 20*time.Second, fmt.Sprintf("seed %d", seed), func() {
			j, err := boltjournal.Open(path, &boltjournal.Options{OpenTimeout: 200 * time.Millisecond})
			check(err, "open")
			if err != nil {
				return
			}
			defer func() { check(j.Close(), "Close") }()
			_, err = j.Records()
			check(err, "Records")
			_, err = j.Lookup("op-1")
			check(err, "Lookup")
			tr, err := idem.NewTransport(j, &idem.Options{MaxAttempts: 1})
			require.NoError(t, err)
			check(tr.Resume(context.Background(), nil), "Resume")
			req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody(fmt.Sprintf("seed-%d", seed), 1))
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				drain(t, resp)
			}
			check(err, "RoundTrip")
			_, err = j.Prune(0)
			check(err, "Prune")
		})
		if first == "" {
			first = "none"
		}
		corrupt[first]++
	}
	t.Logf("%d damaged journals; journal.ErrCorrupt first reported by: %v", seeds, corrupt)
}

// boltMetaTxids reads the transaction IDs the two bbolt meta pages of the
// closed file at path name, and the file's page size. A meta page is a
// 16-byte page header, then magic, version, page size and flags (4 bytes
// each), then the root bucket (16), the freelist page, the high-water mark
// and the transaction ID (8 each), in the machine's byte order.
func boltMetaTxids(tb testing.TB, path string) ([2]uint64, int64) {
	tb.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(tb, err)
	ne := binary.NativeEndian
	pageSize := int64(ne.Uint32(raw[16+8:]))
	var txids [2]uint64
	for i := range txids {
		txids[i] = ne.Uint64(raw[int64(i)*pageSize+16+48:])
	}
	return txids, pageSize
}

// damageBoltMeta flips one byte of meta page i's root bucket field, which
// its checksum covers.
func damageBoltMeta(tb testing.TB, path string, i int, pageSize int64) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(tb, err)
	defer f.Close()
	off := int64(i)*pageSize + 16 + 16
	var b [1]byte
	_, err = f.ReadAt(b[:], off)
	require.NoError(tb, err)
	b[0] ^= 0x01
	_, err = f.WriteAt(b[:], off)
	require.NoError(tb, err)
}

// A Client refuses a journal with a damaged meta page as the journal's own
// opens do (boltjournal's TestDamagedMetaPageRefused): the newest commit may
// be the write-ahead of an operation the server has, which bbolt would
// otherwise open the file without.
func TestDamagedMetaPageRefusedByClient(t *testing.T) {
	for _, which := range []string{"newer", "older"} {
		t.Run(which, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idem.journal")
			for _, op := range []string{"op-1", "op-2"} { // op-2's write-ahead is the newest commit
				j, err := boltjournal.Open(path, nil)
				require.NoError(t, err)
				rec := &idem.Record{Key: "k-" + op, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/payments",
					Body: []byte(`{"amount":100}`), State: idem.StatePending, Created: time.Now(), Updated: time.Now(), CallerKey: true}
				require.NoError(t, j.Create(t.Context(), rec))
				require.NoError(t, j.Close())
			}

			m, pageSize := boltMetaTxids(t, path)
			newer := 0
			if m[1] > m[0] {
				newer = 1
			}
			page := newer
			if which == "older" {
				page = 1 - newer
			}
			damageBoltMeta(t, path, page, pageSize)

			c, err := idem.Open(path, nil)
			if c != nil {
				c.Close()
			}
			name := "Open"
			require.ErrorIs(t, err, journal.ErrCorrupt, name)
			require.ErrorContains(t, err, path, name)
			var meta *boltjournal.MetaPageError
			require.ErrorAs(t, err, &meta, name)
			require.Equal(t, page, meta.Page, name)
			require.Equal(t, m[1-page], meta.Commit, name)
			require.ErrorIs(t, err, berrors.ErrChecksum, name)
		})
	}
}
