// finishing_internal_test.go: a settled note is dropped at once, so that a busy server
// keeps only the settlings in flight; a copy that looks after its record's note was
// dropped learns from the count of settlings that it may have been settled.

package server

import (
	"context"
	"testing"
	"time"
)

func TestFinishingDropsSettledNotes(t *testing.T) {
	var f finishing
	scope := func(k string) Scope { return Scope{Identity: "i", Method: "POST", Path: "/p", Key: k} }
	before := f.mark()
	a, b := f.add(scope("a")), f.add(scope("b"))
	pending := f.add(scope("c")) // never settled: kept
	a.settle()
	b.settle()
	if len(f.recs) != 1 || f.recs[pending.hash].seq != pending.seq {
		t.Errorf("notes kept: %v, want c only", f.recs)
	}
	if got := f.wait(context.Background(), scope("a"), time.Millisecond, before); got != maybeSettled {
		t.Errorf("a copy whose claim preceded the settle: wait = %d, want maybeSettled", got)
	}
	if got := f.wait(context.Background(), scope("a"), time.Millisecond, f.mark()); got != notFinishing {
		t.Errorf("a copy whose claim followed the settle: wait = %d, want notFinishing", got)
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
	if f.wait(gone, sc, time.Hour, f.mark()) != notFinishing {
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
	if n, ok := f.recs[second.hash]; !ok || n.seq != second.seq {
		t.Fatalf("the replaced note's settle changed the newer one: %+v", n)
	}
}
