package boltjournal

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// bodyKeys returns the length of each value in the bodies bucket, by key.
func bodyKeys(t *testing.T, j *Journal) map[string]int {
	t.Helper()
	got := map[string]int{}
	require.NoError(t, j.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBodies).ForEach(func(k, v []byte) error {
			got[fmt.Sprintf("%x", k)] = len(v)
			return nil
		})
	}))
	return got
}

// requireBodyKeys is require.Equal for bodyKeys, naming the first
// difference instead of printing thousands of chunks.
func requireBodyKeys(t *testing.T, want, got map[string]int) {
	t.Helper()
	for k, n := range want {
		require.Equal(t, n, got[k], "chunk %s", k)
	}
	require.Len(t, got, len(want), "chunks")
}

// A body up to bodyChunk bytes is one value; a larger one is cut into
// chunks of bodyChunk; one of stageMin bytes or more is staged, in chunks of
// stageChunk for the file's page size, and leaves no mark once written.
func TestBodyStoredInChunks(t *testing.T) {
	j, _ := testJournal(t)
	staged := stageChunk(j.pageSize)
	require.Equal(t, 2012, stageChunk(4096), "two chunks and their keys fill a 4 KiB page")
	for _, size := range []int{1, bodyChunk, bodyChunk + 1, 3*bodyChunk + 17, stageMin - 1,
		stageMin, stageStep + 1, 2*stageStep + staged/2} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			body := make([]byte, size)
			rand.Read(body)
			rec := &Record{Key: fmt.Sprint("k", size), OperationID: fmt.Sprint("op", size),
				Method: http.MethodPost, URL: "http://127.0.0.1/payments", Body: body, State: StatePending}
			require.NoError(t, j.insert(rec, true))

			id := fmt.Sprintf("%x", idKey(seqOf(rec)))
			want := map[string]int{}
			chunk := bodyChunk
			if size >= stageMin {
				chunk = staged
			}
			switch {
			case size <= inlineMax: // in its record's value (inline.go)
			case size <= bodyChunk:
				want[id] = size
			default:
				for n, left := 0, size; left > 0; n++ {
					want[fmt.Sprintf("%s%08x", id, n)] = min(left, chunk)
					left -= chunk
				}
			}
			requireBodyKeys(t, want, bodyKeys(t, j))
			require.Empty(t, stagedMarks(t, j), "the record's commit clears the mark")

			got, err := j.Lookup(rec.OperationID)
			require.NoError(t, err)
			require.True(t, bytes.Equal(body, got.Body), "the body comes back whole")

			rec.State, rec.Status = StateSettled, http.StatusCreated
			require.NoError(t, j.save(rec))
			require.NoError(t, j.flush())
			require.Empty(t, bodyKeys(t, j), "settling deletes every chunk")
		})
	}
}

func TestChunkedBodyDamaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(b *bolt.Bucket, id []byte) error
	}{
		{"chunk lost", func(b *bolt.Bucket, id []byte) error { return b.Delete(chunkKey(id, 1)) }},
		{"chunks swapped", func(b *bolt.Bucket, id []byte) error {
			c0, c1 := bytes.Clone(b.Get(chunkKey(id, 0))), bytes.Clone(b.Get(chunkKey(id, 1)))
			return errors.Join(b.Put(chunkKey(id, 0), c1), b.Put(chunkKey(id, 1), c0))
		}},
		{"extra chunk", func(b *bolt.Bucket, id []byte) error { return b.Put(chunkKey(id, 9), []byte("x")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, _ := testJournal(t)
			body := make([]byte, 2*bodyChunk+5)
			rand.Read(body)
			rec := &Record{Key: "k", OperationID: "op", Method: http.MethodPost,
				URL: "http://127.0.0.1/payments", Body: body, State: StatePending}
			require.NoError(t, j.insert(rec, true))
			require.NoError(t, j.update(func(tx *bolt.Tx) error {
				return tc.change(tx.Bucket(bucketBodies), idKey(seqOf(rec)))
			}))
			_, err := j.Lookup("op")
			require.ErrorIs(t, err, journal.ErrCorrupt, "never a wrong body to send")
		})
	}
}

func TestPruneDeletesChunks(t *testing.T) {
	j, _ := testJournal(t)
	old := time.Now().Add(-48 * time.Hour)
	rec := &Record{Key: "k", Method: http.MethodPost, URL: "http://127.0.0.1/payments",
		Body: make([]byte, 2*bodyChunk), State: StateFailed, Created: old, Updated: old}
	require.NoError(t, j.insert(rec, true))
	require.Len(t, bodyKeys(t, j), 2)
	n, err := j.Prune(24 * time.Hour)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, bodyKeys(t, j))
}

// Stored whole, a large body shared a bbolt leaf with the ones before it, and
// every commit rewrote them all: with four 8 MiB bodies pending, committing a
// fifth took six times its size. In chunks, one commit took about once its
// size (bbolt's copy of it); staged (stageBody), well under that.
func TestLargeBodiesPendingDoNotMultiplyMemory(t *testing.T) {
	const size = 8 << 20
	j, _ := testJournal(t)
	for i := range 5 {
		body := make([]byte, size)
		peak := peakDuring(func() {
			rec := &Record{Key: fmt.Sprint("k", i), Method: http.MethodPost,
				URL: "http://127.0.0.1/payments", Body: body, State: StatePending}
			require.NoError(t, j.insert(rec, true))
		})
		t.Logf("%d large bodies pending: committing another peaked at %.2fx its size", i, peak/size)
		require.Less(t, peak/size, 0.75, "a stageStep's pages at a time, and not the other bodies'")
	}
}

func TestOlderJournalVersionsAreReadAndMarked(t *testing.T) {
	for _, tc := range []struct{ from, want string }{
		{"idem-journal-3", "idem-journal-10"},
		{"idem-journal-4", "idem-journal-11"},
		{"idem-journal-5", "idem-journal-10"},
		{"idem-journal-6", "idem-journal-11"},
		{"idem-journal-7", "idem-journal-11"},
		{"idem-journal-8", "idem-journal-10"},
		{"idem-journal-9", "idem-journal-11"},
	} {
		t.Run(tc.from, func(t *testing.T) {
			j, path := testJournal(t)
			rec := &Record{Key: "k", OperationID: "op", Method: http.MethodPost,
				URL: "http://127.0.0.1/payments", Body: []byte(`{"amount":1}`), State: StatePending}
			require.NoError(t, j.insert(rec, true))
			require.NoError(t, j.update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(metaVersion, []byte(tc.from))
			}))
			require.NoError(t, j.Close())

			ro, err := OpenReadOnly(path, 0)
			require.NoError(t, err)
			got, err := ro.Lookup("op")
			require.NoError(t, err)
			require.Equal(t, rec.Body, got.Body)
			require.NoError(t, ro.Close())
			require.Equal(t, tc.from, journalVersion(t, path), "a reader changes nothing")

			j, err = Open(path, nil)
			require.NoError(t, err)
			got, err = j.Lookup("op")
			require.NoError(t, err)
			require.Equal(t, rec.Body, got.Body)
			require.NoError(t, j.Close())
			require.Equal(t, tc.want, journalVersion(t, path),
				"marked, so that an idem without chunked bodies refuses the file")
		})
	}
}

// deleteBody deletes one record's body, whole or in chunks (staged or not),
// and nothing of its neighbours': the first, a middle and the last record;
// also when its transaction wrote to the same leaves first, so that bbolt's
// cursor walks nodes in memory rather than pages of the file.
func TestDeleteBodyLeavesNeighbours(t *testing.T) {
	t.Parallel()
	sizes := []int{2*bodyChunk + 1, 10, stageMin + 5, 0, bodyChunk + 3, stageMin}
	for _, tc := range []struct {
		victim  int
		rewrite bool
	}{{0, false}, {1, false}, {2, false}, {3, false}, {4, false}, {5, false}, {0, true}, {2, true}, {5, true}} {
		victim := tc.victim
		t.Run(fmt.Sprint(victim, tc.rewrite), func(t *testing.T) {
			j, _ := testJournal(t)
			recs := make([]*Record, len(sizes))
			for i, n := range sizes {
				recs[i] = &Record{Key: fmt.Sprint("k", i), Method: http.MethodPost,
					URL: "http://127.0.0.1/payments", Body: stagedBody(fmt.Sprint("r", i), n), State: StatePending}
				require.NoError(t, j.insert(recs[i], true))
			}
			before := bodyKeys(t, j)
			require.NoError(t, j.update(func(tx *bolt.Tx) error {
				bodies, id := tx.Bucket(bucketBodies), idKey(seqOf(recs[victim]))
				if tc.rewrite {
					c := bodies.Cursor()
					var kvs [][2][]byte
					for k, v := c.Seek(id); k != nil && bytes.HasPrefix(k, id); k, v = c.Next() {
						kvs = append(kvs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
					}
					for _, kv := range kvs {
						if err := bodies.Put(kv[0], kv[1]); err != nil {
							return err
						}
					}
				}
				return deleteBody(bodies, id)
			}))
			after := bodyKeys(t, j)
			for k := range before {
				mine := strings.HasPrefix(k, fmt.Sprintf("%x", idKey(seqOf(recs[victim]))))
				_, kept := after[k]
				require.Equal(t, !mine, kept, "key %s", k)
			}
			for i, r := range recs {
				if i == victim {
					continue // pending without its body: get refuses it (checkBody)
				}
				got, err := j.get(seqOf(r))
				require.NoError(t, err)
				require.True(t, bytes.Equal(r.Body, got.Body), "record %d", i)
			}
		})
	}
}
