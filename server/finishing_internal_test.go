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
	old := []*settling{f.add(scope("a")), f.add(scope("b"))}
	pending := f.add(scope("c")) // never settled: kept
	for _, s := range old {
		s.settle()
		s.at = s.at.Add(-settledFor) // settled a while ago
	}
	if f.wait(context.Background(), scope("a"), time.Millisecond) {
		t.Error("a copy waited on a record settled settledFor ago")
	}
	recent := f.add(scope("d"))
	recent.settle()
	if _, ok := f.recs[scope("a")]; ok || len(f.recs) != 2 || f.recs[scope("c")] != pending {
		t.Errorf("notes kept: %v, want c and d only", f.recs)
	}
	if len(f.settled)-f.head != 1 {
		t.Errorf("%d settled notes kept, want 1", len(f.settled)-f.head)
	}
	if !f.wait(context.Background(), scope("d"), time.Millisecond) {
		t.Error("a copy did not find the record settled just now")
	}
}
