// Tests for history.go: the settled records of operations nobody can name
// are written to the done bucket in batches; named ones never wait.

package boltjournal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// inBuckets says which buckets of the file hold record id, past every
// in-memory overlay.
func inBuckets(t *testing.T, j *Journal, id uint64) (pending, done bool) {
	t.Helper()
	require.NoError(t, j.view(func(tx *bolt.Tx) error {
		pending = tx.Bucket(bucketPending).Get(idKey(id)) != nil
		done = tx.Bucket(bucketDone).Get(idKey(id)) != nil
		return nil
	}))
	return pending, done
}

// holdHistory makes the owed records wait a minute for their timer, so a
// slow machine cannot see them written before a test looks.
func holdHistory(j *Journal) {
	j.commit.mu.Lock()
	defer j.commit.mu.Unlock()
	j.commit.history.delay = time.Minute
}

func owedBytes(j *Journal) int {
	j.commit.mu.Lock()
	defer j.commit.mu.Unlock()
	return j.commit.history.bytes
}

// settle saves rec as settled, deferred, as a Transport does after a final
// response.
func settle(t *testing.T, j *Journal, rec *Record) {
	t.Helper()
	rec.State, rec.Status, rec.Attempts, rec.Updated = StateSettled, 201, 1, time.Now()
	require.NoError(t, j.Update(context.Background(), rec, journal.Deferred))
}

// owedAfterCommit writes an unnamed operation with key, settles it, and
// lets a commit take the settle: its settled record is then owed.
func owedAfterCommit(t *testing.T, j *Journal, key string) *Record {
	t.Helper()
	rec := pendingRecord(key)
	require.NoError(t, j.insert(rec, false))
	settle(t, j, rec)
	require.NoError(t, j.insert(pendingRecord("next"), false))
	_, d := inBuckets(t, j, seqOf(rec))
	require.False(t, d, "owed, not yet in the done bucket")
	return rec
}

// An unnamed settle leaves pending with the next commit, its settled record
// waits, and reads see it settled all along; a named one is in done at once.
func TestHistoryUnnamedSettleWaitsNamedDoesNot(t *testing.T) {
	j, _ := testJournal(t)
	holdHistory(j)
	ctx := context.Background()
	unnamed, named := pendingRecord("minted"), pendingRecord("k")
	named.OperationID = "order-1/charge"
	require.NoError(t, j.insert(unnamed, false))
	require.NoError(t, j.insert(named, false))
	settle(t, j, unnamed)
	settle(t, j, named)
	require.NoError(t, j.insert(pendingRecord("next"), false)) // the commit they ride

	p, d := inBuckets(t, j, seqOf(unnamed))
	require.False(t, p, "the settle deleted the pending record")
	require.False(t, d, "the settled record waits")
	p, d = inBuckets(t, j, seqOf(named))
	require.False(t, p)
	require.True(t, d, "a named record is never owed: a lookup by its name must find it after a crash")

	got, err := j.Reload(ctx, unnamed)
	require.NoError(t, err)
	require.Equal(t, StateSettled, got.State)
	require.Equal(t, 201, got.Status)

	require.NoError(t, j.Flush(ctx))
	_, d = inBuckets(t, j, seqOf(unnamed))
	require.True(t, d, "Flush writes what is owed")
}

// With nothing else written, the owed records reach the file within
// historyDelay.
func TestHistoryWrittenWithinDelay(t *testing.T) {
	j, _ := testJournal(t)
	const delay = 200 * time.Millisecond
	j.commit.mu.Lock()
	j.commit.history.delay = delay
	j.commit.mu.Unlock()
	rec := pendingRecord("minted")
	require.NoError(t, j.insert(rec, false))
	settle(t, j, rec)
	start := time.Now()
	deadline := start.Add(delay + 5*time.Second) // the machine may be busy
	for {
		if _, d := inBuckets(t, j, seqOf(rec)); d {
			break
		}
		require.True(t, time.Now().Before(deadline), "owed for %v", time.Since(start))
		time.Sleep(20 * time.Millisecond)
	}
	require.GreaterOrEqual(t, time.Since(start), delay/2, "written long before it was due")
}

// Once historyMax bytes are owed, the next commit writes them all, without
// waiting for historyDelay. The settles and the write-ahead that carries them
// are made while commits are held, so the first commit after makes them all
// owed however slow the machine: no flush timer or prune can commit them
// first (a prune's flush would write them whole, and a commit of the settles
// alone would leave the carrier's commit to write what they owe).
func TestHistoryWrittenAtMaxBytes(t *testing.T) {
	j := fastJournal(t)
	holdHistory(j)
	var recs []*Record
	for i := range 2000 {
		rec := pendingRecord(fmt.Sprintf("minted-%d", i))
		require.NoError(t, j.insert(rec, false))
		recs = append(recs, rec)
	}
	j.pruning.Wait() // the prune after the first commit flushes
	release := j.holdCommits()
	for _, rec := range recs {
		settle(t, j, rec)
	}
	carried := make(chan error, 1)
	go func() { carried <- j.insert(pendingRecord("carrier"), false) }()
	for queued := false; !queued; time.Sleep(time.Millisecond) {
		select {
		case err := <-carried:
			t.Fatalf("the carrier's write-ahead returned while commits were held: %v", err)
		default:
		}
		j.commit.mu.Lock()
		queued = len(j.commit.queue) > 0
		j.commit.mu.Unlock()
	}
	release()
	require.NoError(t, <-carried) // its commit makes them owed
	require.GreaterOrEqual(t, owedBytes(j), historyMax, "2,000 settled records are owed")
	require.NoError(t, j.insert(pendingRecord("last"), false)) // takes what is owed
	for _, rec := range recs {
		_, d := inBuckets(t, j, seqOf(rec))
		require.True(t, d, "record %d still owed", seqOf(rec))
	}
}

// Close writes what is owed: a clean restart lists every settled record.
func TestHistoryWrittenOnClose(t *testing.T) {
	j, _ := testJournal(t)
	holdHistory(j)
	owedAfterCommit(t, j, "minted")
	j = reopen(t, j)
	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, "minted", recs[1].Key)
	require.Equal(t, StateSettled, recs[1].State)
}

// Resolving an operation by its minted key finds it while its settled
// record is still owed: it is final, not missing.
func TestHistoryResolveFindsOwed(t *testing.T) {
	j, _ := testJournal(t)
	holdHistory(j)
	owedAfterCommit(t, j, "minted")
	_, _, err := j.ResolveFrom(journal.Name{Key: "minted"}, 200)
	require.ErrorIs(t, err, journal.ErrFinal)
}

// A change to a record whose settled record is still owed is not lost: the
// commit that carries it writes the owed record first.
func TestHistoryChangeToOwedRecordKept(t *testing.T) {
	j, _ := testJournal(t)
	holdHistory(j)
	ctx := context.Background()
	rec := owedAfterCommit(t, j, "minted")
	rec.LastError, rec.Updated = "noted later", time.Now()
	require.NoError(t, j.Update(ctx, rec, journal.Deferred))
	require.NoError(t, j.insert(pendingRecord("another"), false)) // the commit it rides
	j = reopen(t, j)
	recs, err := j.Records()
	require.NoError(t, err)
	var got *Record
	for _, r := range recs {
		if r.Key == "minted" {
			got = r
		}
	}
	require.NotNil(t, got)
	require.Equal(t, "noted later", got.LastError)
}
