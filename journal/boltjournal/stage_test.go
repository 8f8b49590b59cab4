// Bodies of stageMin bytes or more are staged: written ahead of their record
// in transactions of their own (stageBody); journal_body_test.go checks
// their layout. These tests check that a record refused (journal.ErrNameTaken) leaves
// no body behind, and that a crash, or a Close, between staging and the
// record's commit leaves nothing behind once the journal is reopened: in
// this process, and in a child killed with SIGKILL.

package boltjournal

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// stagedBody is a body of size bytes that names id, so that a reader can
// tell it apart from any other operation's.
func stagedBody(id string, size int) []byte {
	return bytes.Repeat([]byte(id+"|"), size/(len(id)+1)+1)[:size]
}

// stagedMarks returns the record IDs marked staged in the meta bucket.
func stagedMarks(t *testing.T, j *Journal) []string {
	t.Helper()
	var ids []string
	require.NoError(t, j.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketMeta).Cursor()
		for k, _ := c.Seek(stagedPrefix); bytes.HasPrefix(k, stagedPrefix); k, _ = c.Next() {
			ids = append(ids, fmt.Sprintf("%x", k[len(stagedPrefix):]))
		}
		return nil
	}))
	return ids
}

// orphanBodies returns the keys in the bodies bucket whose record is in
// neither the pending nor the done bucket.
func orphanBodies(t *testing.T, j *Journal) []string {
	t.Helper()
	var orphans []string
	require.NoError(t, j.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBodies).ForEach(func(k, _ []byte) error {
			id := k[:8]
			if tx.Bucket(bucketPending).Get(id) == nil && tx.Bucket(bucketDone).Get(id) == nil {
				orphans = append(orphans, fmt.Sprintf("%x", k))
			}
			return nil
		})
	}))
	return orphans
}

func TestStagedBodyOfRefusedRecordIsDropped(t *testing.T) {
	j, _ := testJournal(t)
	first := &Record{Key: "k1", OperationID: "op", Method: http.MethodPost,
		URL: "http://127.0.0.1/payments", Body: []byte(`{"amount":1}`), State: StatePending}
	require.NoError(t, j.insert(first, true))
	again := &Record{Key: "k2", OperationID: "op", Method: http.MethodPost,
		URL: "http://127.0.0.1/payments", Body: stagedBody("op", 2*stageStep), State: StatePending}
	require.ErrorIs(t, j.insert(again, true), journal.ErrNameTaken)
	require.Empty(t, bodyKeys(t, j), "the first body is inline (inline.go), the staged one dropped")
	require.Empty(t, stagedMarks(t, j))
}

// A crash after staging, before the record's commit, leaves the staged
// chunks and their mark in the file, as Close without the commit does here.
// The next writable open drops them; a read-only open leaves them be.
func TestStagedBodyWithoutRecordDroppedOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	j, err := Open(path, nil)
	require.NoError(t, err)
	kept := &Record{Key: "kept", Method: http.MethodPost, URL: "http://127.0.0.1/payments",
		Body: stagedBody("kept", stageMin), State: StatePending}
	require.NoError(t, j.insert(kept, true))
	_, err = j.stageBody(stagedBody("lost", 2*stageStep+1), j.plainStep(), nil)
	require.NoError(t, err)
	require.Len(t, stagedMarks(t, j), 1)
	require.NotEmpty(t, orphanBodies(t, j))
	require.NoError(t, j.Close())

	ro, err := OpenReadOnly(path, time.Second)
	require.NoError(t, err)
	require.Len(t, stagedMarks(t, ro), 1, "a reader changes nothing")
	require.NoError(t, ro.Close())

	j, err = Open(path, nil)
	require.NoError(t, err)
	defer j.Close()
	require.Empty(t, stagedMarks(t, j))
	require.Empty(t, orphanBodies(t, j))
	got, err := j.get(seqOf(kept))
	require.NoError(t, err)
	require.True(t, bytes.Equal(kept.Body, got.Body), "the committed record keeps its body")
}

// Environment of the stage-writer child.
const (
	envBodyBytes = "IDEM_BODY_BYTES"
	envStageOnly = "IDEM_STAGE_ONLY" // stage one body, say ready, and wait to be killed
)

func TestStagedBodySIGKILL(t *testing.T) {
	t.Parallel()
	kills := 4
	if testing.Short() {
		kills = 2
	}
	path := filepath.Join(t.TempDir(), "staged.journal")
	size := 3*stageStep + 100 // four staging commits, then the record's
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var reported []string
	orphaned := 0 // kills that left a body staged without its record
	for run := range kills {
		life := time.Duration(50+rng.IntN(350)) * time.Millisecond
		reported = append(reported, runStageWriter(t, run, path, size, life)...)
		require.GreaterOrEqual(t, len(reported), run+1, "each child writes a record before it is ready")

		ro, err := OpenReadOnly(path, time.Second)
		require.NoError(t, err, "read-only open after kill %d", run+1)
		marks := len(stagedMarks(t, ro))
		require.NoError(t, ro.Close())
		if marks > 0 {
			orphaned++
		}

		j, err := Open(path, nil)
		require.NoError(t, err, "reopen after kill %d", run+1)
		require.Empty(t, stagedMarks(t, j), "kill %d", run+1)
		require.Empty(t, orphanBodies(t, j), "kill %d: chunks of a record never committed", run+1)
		for _, op := range reported {
			rec, err := j.Lookup(op)
			require.NoError(t, err, "kill %d: %s", run+1, op)
			require.NotNil(t, rec, "kill %d: %s was written ahead, then lost", run+1, op)
			require.True(t, bytes.Equal(stagedBody(op, size), rec.Body), "kill %d: %s", run+1, op)
		}
		require.NoError(t, j.Close())
		t.Logf("kill %d after %v: %d staged bodies without a record dropped; %d large records written ahead in all",
			run+1, life, marks, len(reported))
	}

	// And once for certain: a child that stages a body and is killed before
	// it writes the record.
	runStageWriter(t, kills, path, size, 0, envStageOnly+"=1")
	ro, err := OpenReadOnly(path, time.Second)
	require.NoError(t, err)
	require.Len(t, stagedMarks(t, ro), 1, "the child staged a body")
	require.NotEmpty(t, orphanBodies(t, ro))
	require.NoError(t, ro.Close())
	j, err := Open(path, nil)
	require.NoError(t, err)
	defer j.Close()
	require.Empty(t, stagedMarks(t, j))
	require.Empty(t, orphanBodies(t, j))
	t.Logf("%d of %d random kills left a staged body without its record; all were dropped on reopen", orphaned, kills)
}

// runStageWriter runs a stage-writer child for life once it is ready, kills
// it, and returns the operation IDs it reported written ahead.
func runStageWriter(tb testing.TB, run int, path string, size int, life time.Duration, env ...string) []string {
	tb.Helper()
	env = append(env, envJournal+"="+path, envRun+"="+strconv.Itoa(run), envBodyBytes+"="+strconv.Itoa(size))
	return runAndKill(tb, run, life, "stage-writer", env...)
}

// helperStageWriter writes records with bodies of IDEM_BODY_BYTES bytes into
// the journal, one after another, until it is killed. It prints "op=ID" once
// each record's commit returned, and "ready" after the first. With
// IDEM_STAGE_ONLY it stages one body, prints "ready", and waits.
func helperStageWriter() int {
	size, err := strconv.Atoi(os.Getenv(envBodyBytes))
	if err != nil {
		fmt.Fprintln(os.Stderr, envBodyBytes, err)
		return 3
	}
	j, err := Open(os.Getenv(envJournal), &Options{OpenTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer j.Close()
	if os.Getenv(envStageOnly) != "" {
		if _, err := j.stageBody(stagedBody("staged-only", size), j.plainStep(), nil); err != nil {
			fmt.Fprintln(os.Stderr, "stage:", err)
			return 3
		}
		fmt.Println("ready")
		time.Sleep(time.Minute) // bounded; the parent kills the child at once
		return 4
	}
	for k := range 1000 { // bounded; the parent kills the child long before
		op := fmt.Sprintf("r%s-%d", os.Getenv(envRun), k)
		rec := &Record{Key: op, OperationID: op, Method: http.MethodPost,
			URL: "http://127.0.0.1/payments", Body: stagedBody(op, size), State: StatePending}
		if err := j.insert(rec, true); err != nil {
			fmt.Fprintln(os.Stderr, "insert:", err)
			return 3
		}
		os.Stdout.WriteString("op=" + op + "\n")
		if k == 0 { // so that every kill finds one record to keep, however slow the machine
			fmt.Println("ready")
		}
	}
	fmt.Fprintln(os.Stderr, "stage-writer was not killed")
	return 4
}

// A large body written after Close gets journal.ErrClosed, like a small
// one. (That a Client sends nothing then: closed_test.go.)
func TestStagedBodyAfterClose(t *testing.T) {
	for _, n := range []int{stageMin - 1, stageMin} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			j, _ := testJournal(t)
			require.NoError(t, j.Close())
			rec := pendingRecord(fmt.Sprint("k", n))
			rec.Body = stagedBody("x", n)
			require.ErrorIs(t, j.insert(rec, true), journal.ErrClosed)
		})
	}
}

// Close while a large body is being staged: the insert either committed
// whole or failed with journal.ErrClosed, and the next open holds no trace of
// a failed one.
func TestStagedBodyCloseDuringInsert(t *testing.T) {
	for run := range 6 {
		path := filepath.Join(t.TempDir(), "idem.journal")
		j, err := Open(path, nil)
		require.NoError(t, err)
		rec := pendingRecord(fmt.Sprint("k", run))
		rec.Body = stagedBody("x", 3*stageStep+7)
		var insErr error
		var wg sync.WaitGroup
		wg.Go(func() { insErr = j.insert(rec, true) })
		time.Sleep(time.Duration(run) * 3 * time.Millisecond)
		require.NoError(t, j.Close())
		wg.Wait()
		if insErr != nil {
			require.ErrorIs(t, insErr, journal.ErrClosed, "run %d", run)
		}

		j, err = Open(path, nil)
		require.NoError(t, err)
		require.Empty(t, stagedMarks(t, j))
		require.Empty(t, orphanBodies(t, j))
		got, err := j.find("k\x00" + rec.Key)
		require.NoError(t, err)
		if insErr == nil {
			require.NotNil(t, got, "run %d", run)
			require.True(t, bytes.Equal(rec.Body, got.Body), "run %d", run)
		} else {
			require.Nil(t, got, "run %d", run)
		}
		require.NoError(t, j.Close())
	}
}

// Large bodies staged while other commits remap the growing file, as they do
// without the 1 GiB mapping (Windows, 32-bit) or past it: the staging reads
// nothing from the mapping outside a transaction (under -race, a data race).
func TestStagedBodiesWhileRemapping(t *testing.T) {
	saved := initialMmapSize
	initialMmapSize = 0
	defer func() { initialMmapSize = saved }()
	j, _ := testJournal(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 4 {
				op := fmt.Sprint("w", w, "-", i)
				rec := &Record{Key: op, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/p",
					Body: stagedBody(op, stageMin+i), State: StatePending}
				if err := j.insert(rec, true); err != nil {
					t.Errorf("insert: %v", err)
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, orphanBodies(t, j))
	require.Empty(t, stagedMarks(t, j))
}

// A nested bucket under the mark's prefix is not idem's: the open ignores it.
func TestStagedMarkThatIsABucketIsIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	j, err := Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, j.update(func(tx *bolt.Tx) error {
		_, err := tx.Bucket(bucketMeta).CreateBucket(stagedKey(idKey(99)))
		return err
	}))
	require.NoError(t, j.Close())
	j, err = Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, j.Close())
}

// sealedJournal opens a journal at path with one encryption key.
func sealedJournal(t *testing.T, path string) *Journal {
	t.Helper()
	key := bytes.Repeat([]byte{9}, KeySize)
	j, err := Open(path, &Options{Encryption: &Keyring{Current: "k", Keys: map[string][]byte{"k": key}}})
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	return j
}

// storedBody returns a record's body as the file holds it.
func storedBody(t *testing.T, j *Journal, id uint64) []byte {
	t.Helper()
	var b []byte
	require.NoError(t, j.view(func(tx *bolt.Tx) error {
		b = storedBodyTx(tx, idKey(id))
		return nil
	}))
	return b
}

// With Options.Encryption a staged body is sealed in parts of stageStep
// bytes, each on its own: its ciphertext is never a second full copy.
func TestSealedBodyStagedInParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	j := sealedJournal(t, path)
	body := stagedBody("op", 2*stageStep+stageStep/2) // three parts
	rec := &Record{Key: "k1", OperationID: "op", Method: http.MethodPost,
		URL: "http://127.0.0.1/payments?card=4111", Body: body, State: StatePending}
	require.NoError(t, j.insert(rec, true))
	overhead := len(storedBody(t, j, seqOf(rec))) - len(body)
	require.Equal(t, 3*(1+12+16), overhead, "three parts, each with its version byte, nonce and tag")
	require.False(t, bytes.Contains(storedBody(t, j, seqOf(rec)), []byte("op|op|")), "sealed")

	got, err := j.Lookup("op")
	require.NoError(t, err)
	require.True(t, bytes.Equal(body, got.Body))
	require.NoError(t, j.Close())
	j = sealedJournal(t, path)
	got, err = j.Lookup("op")
	require.NoError(t, err)
	require.True(t, bytes.Equal(body, got.Body), "and after a reopen")

	large := stagedBody("large", 8<<20)
	peak := peakDuring(func() {
		r := &Record{Key: "k2", Method: http.MethodPost, URL: "http://127.0.0.1/p", Body: large, State: StatePending}
		require.NoError(t, j.insert(r, true))
	})
	t.Logf("writing an 8 MiB body sealed in parts peaked at %.2fx its size", peak/float64(len(large)))
	require.Less(t, peak/float64(len(large)), 1.0, "never a second full copy (sealed whole: 1.4x)")
}

// A body sealed in parts fails to open, never opens as other bytes, when a
// part is altered or the last one is missing.
func TestSealedBodyPartsTampered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(b *bolt.Bucket, id []byte, chunks int) error
	}{
		{"byte flipped in the second part", func(b *bolt.Bucket, id []byte, chunks int) error {
			k := chunkKey(id, chunks/2)
			return b.Put(k, flipLast(bytes.Clone(b.Get(k))))
		}},
		{"last part dropped", func(b *bolt.Bucket, id []byte, chunks int) error {
			// The parts are stageStep+29 bytes each, the last one shorter.
			size := stageChunk(4096)
			for n := (2*(stageStep+29) + size - 1) / size; n < chunks+3; n++ {
				if err := b.Delete(chunkKey(id, n)); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idem.journal")
			j := sealedJournal(t, path)
			rec := &Record{Key: "k", OperationID: "op", Method: http.MethodPost,
				URL: "http://127.0.0.1/payments", Body: stagedBody("op", 2*stageStep+100), State: StatePending}
			require.NoError(t, j.insert(rec, true))
			chunks := len(bodyKeys(t, j))
			require.NoError(t, j.update(func(tx *bolt.Tx) error {
				return tc.change(tx.Bucket(bucketBodies), idKey(seqOf(rec)), chunks)
			}))
			_, err := j.Lookup("op")
			require.ErrorIs(t, err, journal.ErrDecrypt)
		})
	}
}

// A journal written before large bodies were sealed in parts holds them
// sealed whole: they still open.
func TestSealedWholeLargeBodyStillOpens(t *testing.T) {
	j := sealedJournal(t, filepath.Join(t.TempDir(), "idem.journal"))
	rec := &Record{Key: "k", OperationID: "op", Method: http.MethodPost, URL: "http://127.0.0.1/payments",
		Body: stagedBody("op", stageMin+7), State: StatePending, EncryptionKeyID: "k"}
	rec.BodySHA256 = journal.BodySum(rec.Body)
	meta, err := j.keyring.encodeMeta(rec) // bodySegment 0: sealed whole
	require.NoError(t, err)
	box, err := j.keyring.encodeBody(rec)
	require.NoError(t, err)
	require.NoError(t, j.update(func(tx *bolt.Tx) error {
		id, _ := tx.Bucket(bucketPending).NextSequence()
		setSeq(rec, id)
		if err := tx.Bucket(bucketIndex).Put([]byte("o\x00op"), idKey(id)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPending).Put(idKey(id), meta); err != nil {
			return err
		}
		return putBody(tx.Bucket(bucketBodies), idKey(id), box)
	}))
	got, err := j.Lookup("op")
	require.NoError(t, err)
	require.True(t, bytes.Equal(rec.Body, got.Body))
}

// A body part size no idem writes (past 1 GiB; near math.MaxInt it would
// overflow the part arithmetic) makes the record one that does not open, like
// any other: journal.ErrDecrypt, and listed as Sealed among the rest.
func TestSealedBodySegmentOutOfRange(t *testing.T) {
	j := sealedJournal(t, filepath.Join(t.TempDir(), "idem.journal"))
	good := &Record{Key: "k0", OperationID: "good", Method: http.MethodPost, URL: "http://127.0.0.1/p",
		Body: stagedBody("good", 10), State: StatePending}
	require.NoError(t, j.insert(good, true))
	for _, seg := range []int{math.MaxInt, 1<<30 + 1} {
		r := &Record{Key: fmt.Sprint("k", seg), OperationID: fmt.Sprint("op", seg), Method: http.MethodPost,
			URL: "http://127.0.0.1/p", Body: stagedBody("one", 2<<20), State: StatePending}
		require.NoError(t, j.insert(r, true))
		setBodySegment(r, seg)
		meta, err := j.keyring.encodeMeta(r)
		require.NoError(t, err)
		require.NoError(t, j.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPending).Put(idKey(seqOf(r)), meta) }))
		_, err = j.Lookup(r.OperationID)
		require.ErrorIs(t, err, journal.ErrDecrypt)
	}
	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.False(t, recs[0].Sealed)
	require.True(t, recs[1].Sealed && recs[2].Sealed)
}
