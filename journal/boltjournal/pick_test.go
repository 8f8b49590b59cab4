// Tests for PendingPicked (journal.Picker): a listing that passes over the
// records its pick skips without copying them out of the file, ends where
// pick stops it, and keeps its read transactions short however much it
// skips.

package boltjournal

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

// insertHosts inserts n pending records, every tenth for host b and the
// others for host a, 16 at a time, and returns the host of each by its
// sequence number.
func insertHosts(t *testing.T, j *Journal, n int) map[uint64]string {
	t.Helper()
	hosts := make(map[uint64]string, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				host := "a.test"
				if i%10 == 0 {
					host = "b.test"
				}
				rec := pendingRecord(fmt.Sprintf("k-%d", i))
				rec.URL = "https://" + host + "/payments?n=" + fmt.Sprint(i)
				if !assertNoError(t, j.insert(rec, true)) {
					return
				}
				mu.Lock()
				hosts[seqOf(rec)] = host
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, hosts, n)
	return hosts
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

func TestPendingPickedSkipsAndStops(t *testing.T) {
	ctx := context.Background()
	j := fastJournal(t)
	n := pendingVisit + pendingPage + 10 // past one transaction's visits
	hosts := insertHosts(t, j, n)

	// Skip a's records: only b's are yielded, in order, and pick was asked
	// about each record once, with its target.
	asked := map[uint64]int{}
	var yielded []uint64
	for rec, err := range j.PendingPicked(ctx, 0, func(seq uint64, target []byte) journal.Pick {
		asked[seq]++
		require.Contains(t, string(target), "https://"+hosts[seq]+"/payments?n=")
		if hosts[seq] == "a.test" {
			return journal.Skip
		}
		return journal.Take
	}) {
		require.NoError(t, err)
		require.Equal(t, "b.test", hosts[seqOf(rec)])
		yielded = append(yielded, seqOf(rec))
	}
	require.Len(t, asked, n)
	for seq, times := range asked {
		require.Equal(t, 1, times, "record %d", seq)
	}
	require.Len(t, yielded, (n+9)/10)
	require.IsIncreasing(t, yielded)

	// Stop ends the listing before the record it was asked about.
	var took []uint64
	asks := 0
	for rec, err := range j.PendingPicked(ctx, 0, func(seq uint64, _ []byte) journal.Pick {
		if asks++; asks == 5 {
			return journal.Stop
		}
		return journal.Take
	}) {
		require.NoError(t, err)
		took = append(took, seqOf(rec))
	}
	require.Equal(t, 5, asks)
	require.Len(t, took, 4)

	// A record skipped is not copied out of the file.
	alloc := func(pick journal.Pick) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, err := range j.PendingPicked(ctx, 0, func(uint64, []byte) journal.Pick { return pick }) {
			require.NoError(t, err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	txs := j.db.Stats().TxN
	skipped := alloc(journal.Skip)
	// A transaction visits pendingVisit records at most: two for n, not one.
	require.Equal(t, 2, j.db.Stats().TxN-txs, "read transactions")
	require.Less(t, skipped*20, alloc(journal.Take), "bytes allocated to skip every record, to take every one")
}

// A record whose change is deferred, not yet in the file, is yielded
// without asking pick: its target is not read from the file.
func TestPendingPickedYieldsDeferredWithoutAsking(t *testing.T) {
	ctx := context.Background()
	j, _ := testJournal(t)
	a := insertWithBody(t, j, "a", "body-a")
	insertWithBody(t, j, "b", "body-b")

	release := j.holdCommits()
	defer release()
	a.Attempts, a.NextAttempt = 1, time.Now().Add(time.Hour).Round(0)
	require.NoError(t, j.Update(ctx, a, journal.Deferred))

	var asked, yielded []string
	for rec, err := range j.PendingPicked(ctx, 0, func(seq uint64, target []byte) journal.Pick {
		asked = append(asked, string(target))
		return journal.Skip
	}) {
		require.NoError(t, err)
		yielded = append(yielded, rec.Key)
	}
	require.Equal(t, []string{"a"}, yielded)
	require.Equal(t, []string{"http://127.0.0.1/payments"}, asked, "b's target, and b skipped")
}
