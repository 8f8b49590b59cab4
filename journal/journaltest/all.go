// This file checks journal.Lister's All, on a Store that implements it:
// every state, pending first, without bodies, deferred updates seen, and a
// listing that changes nothing.

package journaltest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

var allTests = []subtest{
	{"All/Empty", testAllEmpty},
	{"All/EveryStatePendingFirst", testAllStates},
	{"All/ChangesNothing", testAllChangesNothing},
	{"All/Many", testAllMany},
}

// lister returns s as a journal.Lister, or skips t.
func lister(t *testing.T, s journal.Store) journal.Lister {
	t.Helper()
	l, ok := s.(journal.Lister)
	if !ok {
		t.Skipf("%T is not a journal.Lister", s)
	}
	return l
}

// all returns every record All yields, failing t on an error.
func all(t *testing.T, l journal.Lister) []*journal.Record {
	t.Helper()
	var recs []*journal.Record
	for rec, err := range l.All(ctx) {
		if err != nil {
			t.Fatalf("All: %v", err)
		}
		recs = append(recs, rec)
	}
	return recs
}

func testAllEmpty(t *testing.T, c *Config) {
	s := open(t, c)
	if got := all(t, lister(t, s.Store)); len(got) != 0 {
		t.Fatalf("All of an empty store yielded %d records", len(got))
	}
}

// Records in every state, some changed by deferred updates not yet
// flushed: All yields the pending ones, then the finished ones, each in
// creation order, in their newest state, without bodies.
func testAllStates(t *testing.T, c *Config) {
	s := open(t, c)
	l := lister(t, s.Store)
	recs := createN(t, s, 7)
	at := now()
	apply(t, recs[1], journal.EventSettle, journal.Change{Now: at, Status: 201})
	update(t, s, recs[1], journal.Deferred)
	apply(t, recs[2], journal.EventFail, journal.Change{Now: at, Error: "idem: permanent: bad URL"})
	update(t, s, recs[2], journal.Deferred)
	apply(t, recs[3], journal.EventExpire, journal.Change{Now: at})
	update(t, s, recs[3], journal.Durable)
	apply(t, recs[5], journal.EventSettle, journal.Change{Now: at, Status: 409})
	update(t, s, recs[5], journal.Durable)
	recs[6].Attempts, recs[6].LastAttempt = 2, at
	apply(t, recs[6], journal.EventRetry, journal.Change{Status: 503, Next: at.Add(time.Minute), Error: "503"})
	update(t, s, recs[6], journal.Deferred)

	want := []*journal.Record{recs[0], recs[4], recs[6], recs[1], recs[2], recs[3], recs[5]}
	got := all(t, l)
	if !slices.Equal(names(got), names(want)) {
		t.Fatalf("All: %v, want %v (pending first, then finished, each in creation order)", names(got), names(want))
	}
	for i := range got {
		same(t, "All", got[i], want[i], withoutBody)
	}
}

// Listing takes nothing and writes nothing: the records, their claims and
// the pending count are as they were.
func testAllChangesNothing(t *testing.T, c *Config) {
	s := open(t, c)
	l := lister(t, s.Store)
	recs := createN(t, s, 3)
	apply(t, recs[0], journal.EventSettle, journal.Change{Now: now(), Status: 201})
	update(t, s, recs[0], journal.Durable)
	latest := s.LatestWritten()
	for range 2 {
		all(t, l)
	}
	for _, rec := range recs[1:] {
		name := journal.NameOf(rec)
		if !s.TryClaim(name) {
			t.Fatalf("All left %s claimed", name)
		}
		s.Release(name)
		same(t, "Get after All", mustGet(t, s, name), rec, withBody)
	}
	same(t, "Get after All", mustGet(t, s, journal.NameOf(recs[0])), recs[0], withoutBody)
	if n := count(t, s); n != 2 {
		t.Fatalf("PendingCount after All = %d, want 2", n)
	}
	if got := s.LatestWritten(); !got.Equal(latest) {
		t.Fatalf("LatestWritten after All = %v, want %v", got, latest)
	}
}

// Many records, most finished, stream in order past any page size.
func testAllMany(t *testing.T, c *Config) {
	s := open(t, c)
	l := lister(t, s.Store)
	const n = 700
	recs := make([]*journal.Record, n)
	var pendingSeqs, finishedSeqs []uint64
	for i := range recs {
		recs[i] = create(t, s, newRecord(t, fmt.Sprint(i)))
		if i%7 == 0 {
			pendingSeqs = append(pendingSeqs, journal.RefOf(recs[i]).Seq)
			continue
		}
		apply(t, recs[i], journal.EventSettle, journal.Change{Now: now(), Status: 201})
		update(t, s, recs[i], journal.Deferred)
		finishedSeqs = append(finishedSeqs, journal.RefOf(recs[i]).Seq)
	}
	if got, want := seqs(all(t, l)), append(pendingSeqs, finishedSeqs...); !slices.Equal(got, want) {
		t.Fatalf("All of %d records yielded %d; want the %d pending, then the %d settled, each in order",
			n, len(got), len(pendingSeqs), len(finishedSeqs))
	}
}
