package pgjournal

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

// A deferred settle is written at once, flushed within
// deferredFlushDelay without anyone asking, and a retry (still pending) is
// never deferred.
func TestDeferredSettleIsFlushedSoon(t *testing.T) {
	a, _, _ := pair(t)
	unflushed := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.unflushed
	}
	rec := pendingRec(t, "order-6")
	claimCreate(t, a, rec)
	if _, err := journal.Apply(rec, journal.EventRetry, journal.Change{Now: time.Now(), Status: 503}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	if unflushed() {
		t.Fatal("a retry, which leaves the operation pending, was deferred")
	}
	if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	if !unflushed() {
		t.Fatal("a deferred settle was committed synchronously")
	}
	if got, err := a.Get(bg, journal.NameOf(rec)); err != nil || got.State != journal.StateSettled {
		t.Fatalf("after the deferred settle: %+v, %v", got, err)
	}
	for deadline := time.Now().Add(10 * time.Second); unflushed(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the deferred settle was not flushed within 10 s")
		}
	}
}

// Stats counts the write-ahead and the commits that wait for the flush:
// the create's batch and the flush, not the deferred settle itself.
func TestStatsCountsWaitingCommits(t *testing.T) {
	a, _, _ := pair(t)
	rec := pendingRec(t, "order-7")
	before := a.Stats()
	claimCreate(t, a, rec) // no row yet: the claim writes nothing
	if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(bg); err != nil {
		t.Fatal(err)
	}
	got := a.Stats()
	if got.WriteAheads-before.WriteAheads != 1 || got.Commits-before.Commits != 2 {
		t.Fatalf("Stats went from %+v to %+v: want 1 write-ahead and 2 waiting commits (the insert, the flush)", before, got)
	}
}

// A write-ahead committed after a deferred settle makes the settle durable
// (PostgreSQL flushes its WAL in order), so the scheduled flush has nothing
// left to do; a write-ahead refused (its name taken) commits nothing and
// flushes nothing.
func TestWriteAheadFlushesEarlierSettles(t *testing.T) {
	a, _, _ := pair(t)
	unflushed := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.unflushed
	}
	rec := pendingRec(t, "order-8")
	claimCreate(t, a, rec)
	if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	if err := a.Create(bg, pendingRec(t, "order-8")); !errors.Is(err, journal.ErrNameTaken) {
		t.Fatalf("Create of a taken name: %v, want ErrNameTaken", err)
	}
	if !unflushed() {
		t.Fatal("a refused write-ahead, which commits nothing, counted as the settle's flush")
	}
	claimCreate(t, a, pendingRec(t, "order-9"))
	if unflushed() {
		t.Fatal("the settle is still to flush after a write-ahead committed behind it")
	}
}
