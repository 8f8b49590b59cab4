// finishing_internal_test.go: the notes of records being settled are dropped once settled
// for settledFor, as new ones come, so that a busy server keeps only its last second.

package server

import (
	"context"
	"testing"
	"time"
)

func TestFinishingDropsSettledNotes(t *testing.T) {
	var f finishing
	scope := func(k string) Scope { return Scope{Identity: "i", Method: "POST", Path: "/p", Key: k} }
	old := []settling{f.add(scope("a")), f.add(scope("b"))}
	pending := f.add(scope("c")) // never settled: kept
	for _, s := range old {
		s.settle()
	}
	for i := range f.settled {
		f.settled[i].at -= int64(settledFor) // settled a while ago
		n := f.recs[f.settled[i].hash]
		n.at -= int64(settledFor)
		f.recs[f.settled[i].hash] = n
	}
	if f.wait(context.Background(), scope("a"), time.Millisecond) {
		t.Error("a copy waited on a record settled settledFor ago")
	}
	recent := f.add(scope("d"))
	recent.settle()
	if _, ok := f.recs[f.hash(scope("a"))]; ok || len(f.recs) != 2 || f.recs[pending.hash].seq != pending.seq {
		t.Errorf("notes kept: %v, want c and d only", f.recs)
	}
	if len(f.settled)-f.head != 1 {
		t.Errorf("%d settled notes kept, want 1", len(f.settled)-f.head)
	}
	if !f.wait(context.Background(), scope("d"), time.Millisecond) {
		t.Error("a copy did not find the record settled just now")
	}
}

// A note replaced by a newer one of the same hash (the same Scope noted again, or a
// collision) wakes the copies waiting on it, and its own settle leaves the newer one be.
func TestFinishingReplacedNoteWakesWaiters(t *testing.T) {
	var f finishing
	sc := Scope{Method: "POST", Path: "/p", Key: "k"}
	first := f.add(sc)
	gone, cancel := context.WithCancel(context.Background())
	cancel() // a copy that waits, and leaves at once: its channel stays
	if f.wait(gone, sc, time.Hour) {
		t.Fatal("a copy that left reports the record settled")
	}
	waiting := f.waiters[first.hash]
	second := f.add(sc)
	select {
	case <-waiting:
	default:
		t.Fatal("the copies waiting on a replaced note were not woken")
	}
	first.settle()
	if n := f.recs[second.hash]; n.seq != second.seq || n.settled {
		t.Fatalf("the replaced note's settle changed the newer one: %+v", n)
	}
}
