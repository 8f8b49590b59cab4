// This file checks Pending and PendingCount: order, the after bound,
// records without bodies, a consumer that stops early or writes while it
// reads, and many records.

package journaltest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/idem-go/idem/journal"
)

var pendingTests = []subtest{
	{"Pending/Empty", testPendingEmpty},
	{"Pending/CreationOrderWithoutBodies", testPendingOrder},
	{"Pending/After", testPendingAfter},
	{"Pending/ReloadListed", testReloadListed},
	{"Pending/ConsumerBreaks", testPendingBreak},
	{"Pending/WritesWhileListing", testPendingWrites},
	{"Pending/Many", testPendingMany},
}

func testPendingEmpty(t *testing.T, c *Config) {
	s := open(t, c)
	if got := pending(t, s, 0); len(got) != 0 {
		t.Fatalf("Pending of an empty store yielded %d records", len(got))
	}
	if n := count(t, s); n != 0 {
		t.Fatalf("PendingCount of an empty store = %d", n)
	}
}

// createN creates n records named "0".."n-1", one after another.
func createN(t *testing.T, s journal.Store, n int) []*journal.Record {
	t.Helper()
	recs := make([]*journal.Record, n)
	for i := range recs {
		recs[i] = create(t, s, newRecord(t, fmt.Sprint(i)))
	}
	return recs
}

func testPendingOrder(t *testing.T, c *Config) {
	s := open(t, c)
	recs := createN(t, s, 5)
	for _, i := range []int{1, 3} {
		apply(t, recs[i], journal.EventSettle, journal.Change{Now: now(), Status: 200})
		update(t, s, recs[i], journal.Deferred)
	}
	want := []*journal.Record{recs[0], recs[2], recs[4]}
	got := pending(t, s, 0)
	if !slices.Equal(names(got), names(want)) {
		t.Fatalf("Pending: %v, want %v", names(got), names(want))
	}
	for i := range got {
		same(t, "Pending", got[i], want[i], withoutBody)
	}
	if n := count(t, s); n != 3 {
		t.Fatalf("PendingCount = %d, want 3", n)
	}
}

func testPendingAfter(t *testing.T, c *Config) {
	s := open(t, c)
	recs := createN(t, s, 5)
	seq := func(i int) uint64 { return journal.RefOf(recs[i]).Seq }
	for _, tc := range []struct {
		after uint64
		want  []*journal.Record
	}{
		{0, recs},
		{seq(0), recs[1:]},
		{seq(2), recs[3:]},
		{seq(3) - 1, recs[3:]}, // any bound works, not only a Seq given
		{seq(4), nil},
		{seq(4) + 1000, nil},
	} {
		if got := pending(t, s, tc.after); !slices.Equal(names(got), names(tc.want)) {
			t.Fatalf("Pending(%d): %v, want %v", tc.after, names(got), names(tc.want))
		}
	}
}

// A listed record, without its body, is enough for Reload to read it with
// its body: Resume lists, then reads each one it sends.
func testReloadListed(t *testing.T, c *Config) {
	s := open(t, c)
	recs := createN(t, s, 3)
	for i, listed := range pending(t, s, 0) {
		same(t, "Reload of a listed record", mustReload(t, s, listed), recs[i], withBody)
	}
}

func testPendingBreak(t *testing.T, c *Config) {
	s := open(t, c)
	recs := createN(t, s, 5)
	for _, stop := range []int{1, 3} {
		n := 0
		for rec, err := range s.Pending(ctx, 0) {
			if err != nil {
				t.Fatalf("Pending: %v", err)
			}
			if journal.NameOf(rec) != journal.NameOf(recs[n]) {
				t.Fatalf("Pending yielded %s at %d, want %s", journal.NameOf(rec), n, journal.NameOf(recs[n]))
			}
			n++
			if n == stop {
				break
			}
		}
		if n != stop {
			t.Fatalf("Pending: consumer stopped after %d, saw %d", stop, n)
		}
	}
	// Stopping left nothing held: the store still writes and reads.
	create(t, s, newRecord(t, "after-break"))
	if n := count(t, s); n != 6 {
		t.Fatalf("PendingCount = %d, want 6", n)
	}
}

// Resume writes while it lists: each record it sends is settled, and calls
// create new operations meanwhile. The listing must neither stall nor skip
// a record it had yet to yield.
func testPendingWrites(t *testing.T, c *Config) {
	s := open(t, c)
	const n = 300
	recs := make([]*journal.Record, n)
	for i := range recs {
		recs[i] = newRecord(t, fmt.Sprint(i))
	}
	for i, err := range concurrently(n, func(i int) error { return s.Create(ctx, recs[i]) }) {
		if err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
	}
	var seen []uint64
	for listed, err := range s.Pending(ctx, 0) {
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		seen = append(seen, journal.RefOf(listed).Seq)
		rec := mustReload(t, s, listed)
		apply(t, rec, journal.EventSettle, journal.Change{Now: now(), Status: 201})
		d := journal.Deferred
		if len(seen)%50 == 0 {
			d = journal.Durable
			create(t, s, newRecord(t, fmt.Sprint("during-", len(seen))))
		}
		update(t, s, rec, d)
	}
	if !slices.IsSorted(seen) || len(seen) < n {
		t.Fatalf("Pending while writing yielded %d records (sorted: %v), want at least the %d there before", len(seen), slices.IsSorted(seen), n)
	}
	for _, rec := range recs {
		if !slices.Contains(seen, journal.RefOf(rec).Seq) {
			t.Fatalf("Pending while writing skipped %s", journal.NameOf(rec))
		}
	}
}

// Many pending records stream in order, and after bounds them anywhere.
func testPendingMany(t *testing.T, c *Config) {
	s := open(t, c)
	const n = 1000
	recs := make([]*journal.Record, n)
	for i := range recs {
		recs[i] = newRecord(t, fmt.Sprint(i))
	}
	const writers = 16
	for w, err := range concurrently(writers, func(w int) error {
		for i := w; i < n; i += writers {
			if err := s.Create(ctx, recs[i]); err != nil {
				return err
			}
		}
		return nil
	}) {
		if err != nil {
			t.Fatalf("writer %d: Create: %v", w, err)
		}
	}
	want := seqs(recs)
	slices.Sort(want)
	if got := seqs(pending(t, s, 0)); !slices.Equal(got, want) {
		t.Fatalf("Pending of %d records yielded %d, in order: %v", n, len(got), slices.IsSorted(got))
	}
	if got := seqs(pending(t, s, want[n/2-1])); !slices.Equal(got, want[n/2:]) {
		t.Fatalf("Pending(after the %dth) yielded %d records, want %d", n/2, len(got), n-n/2)
	}
	if got := count(t, s); got != n {
		t.Fatalf("PendingCount = %d, want %d", got, n)
	}
}
