// The Transport's and the Client's side of tests whose journal side is in
// journal/boltjournal (body_integrity_test.go, residue_test.go,
// stage_test.go, meta_test.go): what a call or a Resume sends, or refuses to
// send, over a bbolt journal. They use the journal's public API, and open
// the closed file with bbolt itself to damage it or look inside.

package idem

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/testhook"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Review (issue 5, item 3), fixed: the body a pending record resumed with
// was never checked against the record's BodySHA256. A sealed record's body
// was authenticated only when it was there, and the key ID that says
// "sealed" is itself unauthenticated, so a lost body entry, or a record
// whose "kid" and "sealed" fields were gone, was resumed with the wrong bytes
// under the operation's real idempotency key. Now the journal refuses a
// record whose body does not hash to its BodySHA256 (journal.ErrCorrupt):
// nothing is sent and it stays pending.
func TestReviewResumeChecksBodyIntegrity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sealed bool
		change func(t *testing.T, tx *bolt.Tx, id []byte)
	}{
		{"sealed record, body entry lost", true, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, testhook.SetStoredBody(tx, id, nil))
		}},
		{"sealed record, kid and sealed part stripped", true, func(t *testing.T, tx *bolt.Tx, id []byte) {
			editMeta(t, tx, id, func(m map[string]any) { delete(m, "kid"); delete(m, "sealed") })
		}},
		{"plaintext record, body entry lost", false, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, testhook.SetStoredBody(tx, id, nil))
		}},
		{"plaintext record, body altered", false, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, testhook.SetStoredBody(tx, id, []byte(`{"amount":999999,"currency":"eur","reference":"x"}`)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSealedFixture(t)
			var kr *boltjournal.Keyring
			if tc.sealed {
				kr = &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": newKey32(t)}}
			}
			j, tr := f.open(t, kr)
			body := f.leavePending(t, tr, "t1")
			require.NoError(t, j.Close())
			tamper(t, f.path, "t1", func(tx *bolt.Tx, id []byte) { tc.change(t, tx, id) })

			f.failing.Store(false)
			sent := len(f.srv.requests())
			j, tr = f.open(t, kr)
			outs := outcomesByOp(t, tr)
			o := outs["t1"]
			if o.Response != nil {
				got := f.srv.requests()
				t.Errorf("resumed with body %q (journaled: %q), status %d", got[len(got)-1].Body, body, o.Response.StatusCode)
			}
			require.ErrorIs(t, o.Err, journal.ErrCorrupt, "a body that does not match its hash is a clear error")
			require.Len(t, f.srv.requests(), sent, "nothing sent")
			recs, err := j.Records()
			require.NoError(t, err)
			require.Equal(t, StatePending, recs[0].State, "it stays pending")
		})
	}
}

// residueSizes are body sizes across the ways the journal stores a body: one
// value, chunks of bodyChunk, and staged chunks (stageMin and over; the
// journal stages 1 MiB, stageMin, per transaction). Each leaves a last chunk
// of at least 16 bytes, so that every stored piece holds an aligned 8-byte
// gram the search below looks for.
var residueSizes = []int{
	200, bodyChunk, bodyChunk + 100, 3*bodyChunk + 1000, 5 * bodyChunk,
	stageMin, stageMin + 3000, 2*stageMin + 7777,
}

// residueBytes is the size of the first n bodies of residueSizes, round
// after round.
func residueBytes(n int) int {
	total := 0
	for i := range n {
		total += residueSizes[i%len(residueSizes)]
	}
	return total
}

// bodyGrams indexes every 8-byte gram at an offset divisible by 8 of each
// body, naming the body. Random bodies make a chance match negligible. A
// bitset of the grams' hashes lets find skip the map for almost every window
// that is no gram: the search reads every byte of a file of tens of MiB.
type bodyGrams struct {
	of   map[uint64]int
	bits []uint64
}

const gramHashBits = 26 // 8 MiB of bits, a few percent set by a test's bodies

// newBodyGrams returns an index for bodies of about bytes bytes in all.
func newBodyGrams(bytes int) *bodyGrams {
	return &bodyGrams{of: make(map[uint64]int, bytes/8), bits: make([]uint64, 1<<gramHashBits/64)}
}

func gramHash(x uint64) uint64 { return x * 0x9e3779b97f4a7c15 >> (64 - gramHashBits) }

// add indexes body as body number n. Like find, it is left out of -race
// bookkeeping.
//
//go:norace
func (g *bodyGrams) add(n int, body []byte) {
	for i := 0; i+8 <= len(body); i += 8 {
		x := binary.LittleEndian.Uint64(body[i:])
		g.of[x] = n
		h := gramHash(x)
		g.bits[h/64] |= 1 << (h % 64)
	}
}

// find returns the bodies any 8-byte window of v comes from. It only reads
// memory no other goroutine writes, so the race detector's bookkeeping of
// each of its reads is left out (it took seconds).
//
//go:norace
func (g *bodyGrams) find(v []byte, found map[int]int) {
	for i := 0; i+8 <= len(v); i++ {
		x := binary.LittleEndian.Uint64(v[i:])
		if h := gramHash(x); g.bits[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		if n, ok := g.of[x]; ok {
			found[n]++
		}
	}
}

// rawBodyResidue opens the closed journal at path with bbolt, read-only,
// walks every bucket and nested bucket, and returns how many 8-byte windows
// of the bodies in g each body still has in a key or value, by body number.
func rawBodyResidue(tb testing.TB, path string, g *bodyGrams) map[int]int {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(tb, err)
	defer db.Close()
	found := map[int]int{}
	var walk func(b *bolt.Bucket) error
	walk = func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			g.find(k, found)
			if v == nil {
				if nested := b.Bucket(k); nested != nil {
					return walk(nested)
				}
			}
			g.find(v, found)
			return nil
		})
	}
	require.NoError(tb, db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			g.find(name, found)
			return walk(b)
		})
	}))
	return found
}

// rawFileResidue counts the bodies in g some of whose bytes are still in the
// file's raw bytes, freed pages included.
func rawFileResidue(tb testing.TB, path string, g *bodyGrams) int {
	tb.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(tb, err)
	found := map[int]int{}
	g.find(raw, found)
	return len(found)
}

func randomBody(tb testing.TB, n int) []byte {
	tb.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(tb, err)
	return b
}

// Many concurrent calls through a Transport against a loopback server, with
// large and staged bodies: once every call has settled, no byte of any body
// is in the file's buckets. The bytes of freed pages are another matter
// (doc.go, "What the file keeps"): the test reports them, it cannot promise
// them gone.
func TestConcurrentSettlesLeaveNoBody(t *testing.T) {
	t.Parallel()
	j := fastJournal(t) // the file's bytes, without the disk's fsync
	path := j.Path()
	srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusCreated)
	})
	tr, _ := transportOn(t, j, Options{}, srv.base(), time.Time{})

	const calls = 24
	g := newBodyGrams(residueBytes(calls))
	bodies := make([][]byte, calls)
	for i := range bodies {
		bodies[i] = randomBody(t, residueSizes[i%len(residueSizes)])
		g.add(i, bodies[i])
	}
	var wg sync.WaitGroup
	errs := make([]error, calls)
	for i := range calls {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", bytes.NewReader(bodies[i]))
			if err != nil {
				errs[i] = err
				return
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				errs[i] = err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				errs[i] = fmt.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
	require.Equal(t, calls, srv.count())
	require.NoError(t, j.Close()) // commits the deferred settles

	require.Empty(t, rawBodyResidue(t, path, g), "bytes of settled bodies in the buckets, by call")
	t.Logf("bodies with bytes left in freed pages of the raw file: %d of %d", rawFileResidue(t, path, g), calls)
}

// A large body sent through a Client after Close gets journal.ErrClosed, like
// a small one, and nothing is sent.
func TestStagedBodyAfterCloseSendsNothing(t *testing.T) {
	srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
	c, err := Open(filepath.Join(t.TempDir(), "idem.journal"), &Options{Base: srv.base()})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", bytes.NewReader(stagedBody("x", stageMin)))
	require.NoError(t, err)
	resp, err := c.HTTPClient().Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, journal.ErrClosed)
	require.Zero(t, srv.count())
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
				rec := &Record{Key: "k-" + op, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/payments",
					Body: []byte(`{"amount":100}`), State: StatePending, Created: time.Now(), Updated: time.Now(), CallerKey: true}
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

			c, err := Open(path, nil)
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
