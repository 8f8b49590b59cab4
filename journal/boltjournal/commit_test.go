package boltjournal

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func pendingRecord(key string) *Record {
	return &Record{Key: key, Method: http.MethodPost, URL: "http://127.0.0.1/payments", State: StatePending}
}

// onDisk reads a record straight from the file, past the deferred overlay.
func onDisk(t *testing.T, j *Journal, id uint64) *Record {
	t.Helper()
	var rec *Record
	require.NoError(t, j.view(func(tx *bolt.Tx) error {
		var err error
		rec, err = j.load(tx, idKey(id))
		return err
	}))
	return rec
}

func TestGroupCommitSharesTransactions(t *testing.T) {
	j, _ := testJournal(t)
	const writers, each = 64, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				rec := pendingRecord(fmt.Sprintf("w%d-%d", w, i))
				if err := j.insert(rec, true); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st := j.Stats()
	require.Equal(t, uint64(writers*each), st.WriteAheads)
	require.Less(t, st.Commits, st.WriteAheads, "concurrent write-aheads must share commits")
	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, writers*each)
	seen := map[uint64]bool{}
	for _, r := range recs {
		require.False(t, seen[seqOf(r)], "duplicate ID %d", seqOf(r))
		seen[seqOf(r)] = true
	}
}

func TestGroupCommitKeyReuseFailsAlone(t *testing.T) {
	j, _ := testJournal(t)
	require.NoError(t, j.insert(pendingRecord("taken"), true))
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Go(func() {
			key := fmt.Sprintf("free-%d", i)
			if i%4 == 0 {
				key = "taken"
			}
			errs[i] = j.insert(pendingRecord(key), true)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%4 == 0 {
			require.ErrorIs(t, err, journal.ErrNameTaken)
		} else {
			require.NoError(t, err)
		}
	}
	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, 1+24)
}

func TestDeferredSaveIsReadBackAndFlushed(t *testing.T) {
	j, _ := testJournal(t)
	rec := pendingRecord("k1")
	rec.OperationID = "op-1"
	require.NoError(t, j.insert(rec, true))
	rec.State, rec.Status = StateSettled, http.StatusCreated
	require.NoError(t, j.save(rec))

	got, err := j.Lookup("op-1")
	require.NoError(t, err)
	require.Equal(t, StateSettled, got.State, "a deferred change is visible before it is committed")

	// With no write-ahead to ride along with, it is committed within
	// flushDelay; the loop is bounded.
	deadline := time.Now().Add(5 * time.Second)
	for onDisk(t, j, seqOf(rec)).State != StateSettled {
		require.True(t, time.Now().Before(deadline), "deferred settle never reached the file")
		time.Sleep(flushDelay / 4)
	}
}

func TestDeferredSaveCommittedOnClose(t *testing.T) {
	j, path := testJournal(t)
	rec := pendingRecord("k1")
	require.NoError(t, j.insert(rec, true))
	for range 3 { // only the newest state counts
		rec.Attempts++
		require.NoError(t, j.save(rec))
	}
	rec.State = StateSettled
	require.NoError(t, j.save(rec))
	require.NoError(t, j.Close())

	j2, err := Open(path, nil)
	require.NoError(t, err)
	defer j2.Close()
	got := onDisk(t, j2, seqOf(rec))
	require.Equal(t, StateSettled, got.State)
	require.Equal(t, 3, got.Attempts)
	require.ErrorIs(t, j.save(rec), journal.ErrClosed)
	require.ErrorIs(t, j.insert(pendingRecord("k2"), true), journal.ErrClosed)
}

func TestSettleRidesAlongWithWriteAhead(t *testing.T) {
	j, _ := testJournal(t)
	a := pendingRecord("a")
	require.NoError(t, j.insert(a, true))
	before := j.Stats().Commits
	a.State = StateSettled
	start := time.Now()
	require.NoError(t, j.save(a))
	require.NoError(t, j.insert(pendingRecord("b"), true))
	if time.Since(start) < flushDelay { // else the flush timer may rightly have fired first
		require.Equal(t, before+1, j.Stats().Commits, "the settle must share the write-ahead's commit")
	}
	require.Equal(t, StateSettled, onDisk(t, j, seqOf(a)).State)
}

// A commit that takes every deferred change stops the flush timer they armed:
// left running, it would start a commit of its own for the changes made after
// that commit, before flushDelay had passed for any of them, splitting the
// next group of write-aheads under load.
func TestRideStopsTheFlushTimer(t *testing.T) {
	j, _ := testJournal(t)
	a := pendingRecord("a")
	require.NoError(t, j.insert(a, true))
	a.State = StateSettled
	require.NoError(t, j.save(a))
	timer := func() *time.Timer {
		j.commit.mu.Lock()
		defer j.commit.mu.Unlock()
		return j.commit.timer
	}
	require.NotNil(t, timer(), "a deferred settle arms the flush timer")
	j.commit.mu.Lock()
	firstGen := j.commit.timerGen
	j.commit.mu.Unlock()
	b := pendingRecord("b")
	require.NoError(t, j.insert(b, true))
	require.Nil(t, timer(), "the write-ahead's commit took the settle: nothing waits for the timer")
	require.Equal(t, StateSettled, onDisk(t, j, seqOf(a)).State)

	// The stopped timer may have fired already, its call waiting for the lock: run
	// late, it must leave the timer of the changes made since alone.
	b.State = StateSettled
	require.NoError(t, j.save(b))
	second := timer()
	require.NotNil(t, second)
	j.flushDeferred(firstGen)
	require.Same(t, second, timer(), "a stale timer's call dropped the current one")
}

// A finished record past Retention is pruned by a later commit, without a
// restart: every pruneInterval, or every quarter of a Retention under 40
// minutes, so that a soak's 3-minute Retention bounds its file.
func TestPeriodicPruneKeepsFileBounded(t *testing.T) {
	require.Equal(t, pruneInterval, pruneEvery(7*24*time.Hour))
	require.Equal(t, 45*time.Second, pruneEvery(3*time.Minute))
	require.Equal(t, time.Second, pruneEvery(time.Second), "at most one prune a second")
	for _, tc := range []struct {
		retention, age, every time.Duration
	}{
		{24 * time.Hour, 48 * time.Hour, pruneInterval},
		{4 * time.Minute, 5 * time.Minute, time.Minute},
	} {
		t.Run(tc.retention.String(), func(t *testing.T) {
			j, err := Open(t.TempDir()+"/idem.journal", &Options{Retention: tc.retention})
			require.NoError(t, err)
			defer j.Close()
			var mu sync.Mutex
			now := time.Now()
			j.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

			old := pendingRecord("old")
			old.State, old.Updated = StateSettled, now.Add(-tc.age)
			require.NoError(t, j.insert(old, true))
			j.pruning.Wait()
			require.NotNil(t, onDisk(t, j, seqOf(old)), "no prune before its interval has passed")

			mu.Lock()
			now = now.Add(tc.every) // the next commit starts a prune
			mu.Unlock()
			require.NoError(t, j.insert(pendingRecord("new"), true))
			j.pruning.Wait()
			require.Nil(t, onDisk(t, j, seqOf(old)), "a finished record past Retention is pruned without a restart")
			recs, err := j.Records()
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Equal(t, StatePending, recs[0].State)
		})
	}
}

func TestPendingAfterPages(t *testing.T) {
	j, _ := testJournal(t)
	var ids []uint64
	for i := range 10 {
		rec := pendingRecord(fmt.Sprintf("k%d", i))
		if i%3 == 0 {
			rec.State = StateFailed // not pending: never listed
		}
		require.NoError(t, j.insert(rec, true))
		if rec.State == StatePending {
			ids = append(ids, seqOf(rec))
		}
	}
	var got []uint64
	for after := uint64(0); ; {
		page, err := j.pendingAfter(after, 4)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 4)
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			require.Equal(t, StatePending, r.State)
			require.Nil(t, r.Body, "listings carry no bodies")
			got = append(got, seqOf(r))
		}
		after = seqOf(page[len(page)-1])
	}
	require.Equal(t, ids, got)
}

// The commit loop starts with the first write and ends with Close: a
// journal leaves no goroutine behind, whether it wrote (write-aheads,
// deferred settles, a flush) or never did.
func TestCommitLoopEndsOnClose(t *testing.T) {
	t.Run("wrote", func(t *testing.T) {
		leakcheck.Check(t)
		j, _ := testJournal(t)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 20 {
					rec := pendingRecord(fmt.Sprintf("w%d-%d", w, i))
					if err := j.insert(rec, true); err != nil {
						t.Error(err)
						return
					}
					rec.State = StateSettled
					if err := j.save(rec); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		require.NoError(t, j.flush())
		require.NoError(t, j.Close())
		require.Equal(t, uint64(160), j.Stats().WriteAheads)
	})
	t.Run("never wrote", func(t *testing.T) {
		leakcheck.Check(t)
		j, _ := testJournal(t)
		require.Nil(t, j.commit.loopDone, "opening a journal starts no commit loop")
		require.NoError(t, j.Close())
	})
}
