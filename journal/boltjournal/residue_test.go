// Tests that a settled operation's body leaves the journal's buckets: many
// settles in one commit (group commit, deferred settles, prune) used to leave
// chunks of large bodies behind (body.go, deleteBody). The file is
// read raw, with bbolt, after the journal is closed.

package boltjournal

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// residueSizes are body sizes across the ways a body is stored: one value,
// chunks of bodyChunk, and staged chunks (stageMin and over). Each leaves a
// last chunk of at least 16 bytes, so that every stored piece holds an
// aligned 8-byte gram the search below looks for.
var residueSizes = []int{
	200, bodyChunk, bodyChunk + 100, 3*bodyChunk + 1000, 5 * bodyChunk,
	stageMin, stageMin + 3000, 2*stageStep + 7777,
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

// Settling many operations in one commit deletes every one's body, whole or
// in chunks, staged or not: deterministic, through the journal's own API.
func TestSettlesInOneCommitLeaveNoBody(t *testing.T) {
	t.Parallel()
	j, path := testJournal(t)
	const rounds = 3
	g := newBodyGrams(residueBytes(rounds * len(residueSizes)))
	var recs []*Record
	for round := range rounds {
		for i, size := range residueSizes {
			n := len(recs)
			body := randomBody(t, size)
			g.add(n, body)
			rec := &Record{Key: fmt.Sprint("k", n), OperationID: fmt.Sprint("op", n), Method: http.MethodPost,
				URL: "http://127.0.0.1/payments", Body: body, State: StatePending}
			require.NoError(t, j.insert(rec, true), "round %d size %d", round, i)
			recs = append(recs, rec)
		}
	}
	for _, rec := range recs { // every settle deferred, then one commit
		rec.State, rec.Status = StateSettled, http.StatusCreated
		require.NoError(t, j.save(rec))
	}
	require.NoError(t, j.flush())
	require.Zero(t, len(bodyKeys(t, j)), "values left in the bodies bucket once all are settled")
	require.NoError(t, j.Close())
	require.Empty(t, rawBodyResidue(t, path, g), "bytes of settled bodies, by operation")
}

// Many concurrent operations, with large and staged bodies, written ahead
// and settled as a Transport does it (Create, then a deferred Update each,
// while others commit): once every one has settled, no byte of any body is
// in the file's buckets. The bytes of freed pages are another matter
// (docs/real-world.md, "The journal file"): the test reports them, it cannot
// promise them gone. (The same through a Transport: erase_test.go.)
func TestConcurrentSettlesLeaveNoBody(t *testing.T) {
	t.Parallel()
	j, path := testJournal(t)
	ctx := context.Background()

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
			rec := &Record{Key: fmt.Sprint("k", i), Method: http.MethodPost,
				URL: "http://127.0.0.1/payments", Body: bodies[i], State: StatePending}
			if errs[i] = j.Create(ctx, rec); errs[i] != nil {
				return
			}
			rec.State, rec.Status, rec.Attempts = StateSettled, http.StatusCreated, 1
			errs[i] = j.Update(ctx, rec, journal.Deferred)
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
	require.EqualValues(t, calls, j.Stats().WriteAheads)
	require.NoError(t, j.Close()) // commits the deferred settles

	require.Empty(t, rawBodyResidue(t, path, g), "bytes of settled bodies in the buckets, by call")
	t.Logf("bodies with bytes left in freed pages of the raw file: %d of %d", rawFileResidue(t, path, g), calls)
}

// A failed operation keeps its body, for reconciling; settled later (by
// hand, or by a late answer) it keeps none.
func TestFailedThenSettledDropsBody(t *testing.T) {
	j, _ := testJournal(t)
	rec := &Record{Key: "k", OperationID: "op", Method: http.MethodPost,
		URL: "http://127.0.0.1/payments", Body: randomBody(t, 3*bodyChunk), State: StatePending}
	require.NoError(t, j.insert(rec, true))
	rec.State, rec.LastError = StateFailed, "gave up"
	require.NoError(t, j.save(rec))
	require.NoError(t, j.flush())
	require.Len(t, bodyKeys(t, j), 3, "a failed operation keeps its body")

	rec.State, rec.Status = StateSettled, http.StatusCreated
	require.NoError(t, j.save(rec))
	require.NoError(t, j.flush())
	require.Empty(t, bodyKeys(t, j), "a settled one does not")
}
