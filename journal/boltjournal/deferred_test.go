// Tests for deferred.go: races between deferred state changes, their
// readers and Close, found by review.

package boltjournal

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

// A read begun after a deferred save of state N returned never sees a state
// older than N, even when the commit carrying N completes during the read.
func TestReadsNeverGoBackInTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j, _ := testJournal(t)
	rec := &Record{Key: "k", OperationID: "op", Method: http.MethodPost, URL: "http://x/",
		Body: make([]byte, 64<<10), State: StatePending, Created: time.Now(), Updated: time.Now()}
	require.NoError(t, j.insert(rec, false))
	var saved atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { // the record's owner changes its state, one change at a time
		r := *rec
		for i := 1; !stop.Load(); i++ {
			r.Attempts = i
			if err := j.Update(ctx, &r, journal.Deferred); err != nil {
				t.Error(err)
				return
			}
			saved.Store(int64(i))
		}
	})
	wg.Go(func() { // other write-aheads drive commits
		for i := 0; !stop.Load(); i++ {
			if err := j.insert(pendingRecord(fmt.Sprintf("x%d", i)), false); err != nil {
				t.Error(err)
				return
			}
		}
	})
	ref := new(Record)
	setSeq(ref, seqOf(rec))
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		before := saved.Load()
		got, err := j.Reload(ctx, ref)
		require.NoError(t, err)
		if int64(got.Attempts) < before {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("saved state %d before the read, read %d", before, got.Attempts)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// Close commits the last deferred changes while readers still consult them.
func TestCloseWhileReadersConsultDeferredChanges(t *testing.T) {
	for range 20 {
		j, err := Open(filepath.Join(t.TempDir(), "j"), nil)
		require.NoError(t, err)
		rec := pendingRecord("k")
		require.NoError(t, j.insert(rec, false))
		rec.Attempts = 3
		require.NoError(t, j.Update(context.Background(), rec, journal.Deferred))
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					j.unsaved(seqOf(rec))
				}
			})
		}
		require.NoError(t, j.Close())
		stop.Store(true)
		wg.Wait()
	}
}
