package boltjournal

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

// Tests for reads racing with settles whose settled record is owed
// (history.go): the file then holds the record in neither bucket while the
// overlay holds it, and a read must see it pending or settled, never gone.

// A Reload that checked the overlay just before the settle and the file
// just after its commit found nothing (found by review).
func TestHistoryReloadNeverSeesSettledUnnamedGone(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 { // the reader and the committer must run at once
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	j := fastJournal(t)
	ctx := context.Background()
	var gone atomic.Int64
	for i := 0; i < 1000 && gone.Load() == 0; i++ {
		rec := pendingRecord(fmt.Sprintf("minted-%d", i))
		if err := j.insert(rec, false); err != nil {
			t.Fatal(err)
		}
		listed := deepCopy(rec) // no listed metadata: Reload goes through get
		var stop atomic.Bool
		var wg sync.WaitGroup
		for r := 0; r < 6; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					got, err := j.Reload(ctx, listed)
					if err != nil {
						t.Error(err)
						return
					}
					if got == nil {
						gone.Add(1)
					}
				}
			}()
		}
		rec.State, rec.Status, rec.Attempts, rec.Updated = StateSettled, 201, 1, time.Now()
		if err := j.Update(ctx, rec, journal.Deferred); err != nil { // as a Transport settles
			t.Fatal(err)
		}
		if err := j.insert(pendingRecord(fmt.Sprintf("ride-%d", i)), false); err != nil { // the commit it rides
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
	}
	if n := gone.Load(); n > 0 {
		t.Fatalf("Reload returned nil (gone) %d times for an operation that was pending, then settled", n)
	}
}

// Records lists every operation while unnamed ones settle beside it: none
// is missing from a listing, pending or settled.
func TestHistoryRecordsNeverMissSettledUnnamed(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	j := fastJournal(t)
	ctx := context.Background()
	const n = 300
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = pendingRecord(fmt.Sprintf("minted-%d", i))
		if err := j.insert(recs[i], false); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, rec := range recs {
			rec.State, rec.Status, rec.Attempts, rec.Updated = StateSettled, 201, 1, time.Now()
			if err := j.Update(ctx, rec, journal.Deferred); err != nil {
				t.Error(err)
				return
			}
			if err := j.insert(pendingRecord(fmt.Sprintf("ride-%d", i)), false); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 50 {
		listed, err := j.Records()
		if err != nil {
			t.Fatal(err)
		}
		seen := make(map[string]bool, len(listed))
		for _, r := range listed {
			seen[r.Key] = true
		}
		for _, rec := range recs {
			if !seen[rec.Key] {
				wg.Wait()
				t.Fatalf("%s missing from a listing of %d records", rec.Key, len(listed))
			}
		}
	}
	wg.Wait()
}
