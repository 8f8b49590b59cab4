package pgjournal

import (
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

// A Journal prunes its namespace by itself, with its retention as
// KeepAtLeast raised it: a settled operation older than that goes, a
// younger one and a pending one stay.
func TestJournalPrunesByItself(t *testing.T) {
	pool := testPool(t)
	j := openTest(t, pool, Options{Schema: testSchema(t, pool), Namespace: namespace(t),
		Lease: time.Second, Retention: time.Minute})
	j.KeepAtLeast(2 * time.Hour)
	j.KeepAtLeast(time.Hour) // never lowers it
	settled := func(id string, age time.Duration) *journal.Record {
		rec := pendingRec(t, id)
		claimCreate(t, j, rec)
		if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: j.Now().Add(-age), Status: 201}); err != nil {
			t.Fatal(err)
		}
		if err := j.Update(bg, rec, journal.Durable); err != nil {
			t.Fatal(err)
		}
		j.Release(journal.NameOf(rec))
		return rec
	}
	old, young := settled("old", 3*time.Hour), settled("young", 90*time.Minute)
	pending := pendingRec(t, "pending")
	claimCreate(t, j, pending)
	j.Release(journal.NameOf(pending))

	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := j.Get(bg, journal.NameOf(old))
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the settled operation 3 h old was not pruned within 10 s (retention 2 h)")
		}
	}
	for _, rec := range []*journal.Record{young, pending} {
		if got, err := j.Get(bg, journal.NameOf(rec)); err != nil || got == nil {
			t.Fatalf("%s was pruned (%v): retention is 2 h and pending operations stay", rec.OperationID, err)
		}
	}
}
