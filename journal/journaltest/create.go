// This file checks Create and Get: names, order, duplicates, concurrency,
// and that records go in and come out as copies.

package journaltest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/idem-go/idem/journal"
)

var createTests = []subtest{
	{"Create/GetByOperationID", testGetByOperationID},
	{"Create/GetByCallerKey", testGetByCallerKey},
	{"Create/MintedKeyNeedNotBeFound", testMintedKey},
	{"Create/SeqIncreasesInCreationOrder", testSeqOrder},
	{"Create/DuplicateOperationID", testDuplicateOperationID},
	{"Create/DuplicateCallerKey", testDuplicateCallerKey},
	{"Create/DuplicateOfFinishedOperation", testDuplicateFinished},
	{"Create/ConcurrentDistinct", testConcurrentDistinct},
	{"Create/ConcurrentSameOperationID", testConcurrentSame},
	{"Create/KeepsNoCallerMemory", testCreateKeepsNoCallerMemory},
	{"Get/Unknown", testGetUnknown},
	{"Get/ReturnsCopies", testGetReturnsCopies},
}

func testGetByOperationID(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	same(t, "Get by operation ID", mustGet(t, s, journal.Name{OperationID: "op-1"}), rec, withBody)
	same(t, "Get by NameOf", mustGet(t, s, journal.NameOf(rec)), rec, withBody)
}

func testGetByCallerKey(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newKeyed(t, "caller-key-1"))
	same(t, "Get by caller key", mustGet(t, s, journal.Name{Key: "caller-key-1"}), rec, withBody)

	// An operation with both is found by either.
	both := newRecord(t, "2")
	both.CallerKey = true
	create(t, s, both)
	same(t, "Get by operation ID", mustGet(t, s, journal.Name{OperationID: "op-2"}), both, withBody)
	same(t, "Get by its caller key", mustGet(t, s, journal.Name{Key: "key-2"}), both, withBody)
}

// A key idem minted need not be found, but looking it up is no error, and
// what is found, if anything, is that operation.
func testMintedKey(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	if got := get(t, s, journal.Name{Key: rec.Key}); got != nil {
		same(t, "Get by minted key", got, rec, withBody)
	}
}

func testSeqOrder(t *testing.T, c *Config) {
	s := open(t, c)
	var prev uint64
	for i := range 5 {
		rec := create(t, s, newRecord(t, fmt.Sprint(i)))
		seq := journal.RefOf(rec).Seq
		if seq <= prev {
			t.Fatalf("record %d: Ref.Seq %d after %d, want it increasing in creation order", i, seq, prev)
		}
		prev = seq
		if got := journal.RefOf(mustGet(t, s, journal.NameOf(rec))).Seq; got != seq {
			t.Fatalf("record %d: Get returned Ref.Seq %d, Create set %d", i, got, seq)
		}
	}
}

// checkRefused checks that Create refused dup as a duplicate and wrote
// nothing: dup has no Ref, and the store holds only what it held.
func checkRefused(t *testing.T, s journal.Store, dup *journal.Record, wantPending int) {
	t.Helper()
	err := s.Create(ctx, dup)
	if !errors.Is(err, journal.ErrNameTaken) {
		t.Fatalf("Create of a duplicate (%s): %v, want an error matching journal.ErrNameTaken", journal.NameOf(dup), err)
	}
	if seq := journal.RefOf(dup).Seq; seq != 0 {
		t.Errorf("a refused Create set Ref.Seq %d", seq)
	}
	if n := count(t, s); n != wantPending {
		t.Errorf("PendingCount = %d after a refused Create, want %d", n, wantPending)
	}
}

func testDuplicateOperationID(t *testing.T, c *Config) {
	s := open(t, c)
	orig := create(t, s, newRecord(t, "1"))
	dup := newRecord(t, "1-again")
	dup.OperationID = orig.OperationID
	dup.CallerKey = true
	checkRefused(t, s, dup, 1)
	same(t, "the original", mustGet(t, s, journal.NameOf(orig)), orig, withBody)
	if got := get(t, s, journal.Name{Key: dup.Key}); got != nil {
		t.Errorf("the refused record's caller key names %s", journal.NameOf(got))
	}
}

func testDuplicateCallerKey(t *testing.T, c *Config) {
	s := open(t, c)
	orig := create(t, s, newKeyed(t, "caller-key"))
	checkRefused(t, s, newKeyed(t, "caller-key"), 1)

	// The same key under an operation ID of its own is taken too.
	dup := newRecord(t, "2")
	dup.Key, dup.CallerKey = orig.Key, true
	checkRefused(t, s, dup, 1)
	if got := get(t, s, journal.NameOf(dup)); got != nil {
		t.Errorf("the refused record's operation ID names %s", journal.NameOf(got))
	}
	same(t, "the original", mustGet(t, s, journal.NameOf(orig)), orig, withBody)
}

// A finished operation still holds its name until it is pruned.
func testDuplicateFinished(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	apply(t, rec, journal.EventSettle, journal.Change{Now: now(), Status: 201})
	update(t, s, rec, journal.Durable)
	dup := newRecord(t, "1-again")
	dup.OperationID = rec.OperationID
	checkRefused(t, s, dup, 0)
}

// concurrently runs fn(0..n-1) in n goroutines released together, and
// returns their errors by index.
func concurrently(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func testConcurrentDistinct(t *testing.T, c *Config) {
	s := open(t, c)
	const n = 32
	recs := make([]*journal.Record, n)
	for i := range recs {
		recs[i] = newRecord(t, fmt.Sprint(i))
	}
	for i, err := range concurrently(n, func(i int) error { return s.Create(ctx, recs[i]) }) {
		if err != nil {
			t.Fatalf("concurrent Create %d: %v", i, err)
		}
	}
	seen := make(map[uint64]bool)
	for _, rec := range recs {
		seq := journal.RefOf(rec).Seq
		if seq == 0 || seen[seq] {
			t.Fatalf("concurrent Creates: Ref.Seq %d zero or given twice", seq)
		}
		seen[seq] = true
		same(t, "Get", mustGet(t, s, journal.NameOf(rec)), rec, withBody)
	}
	if got := count(t, s); got != n {
		t.Fatalf("PendingCount = %d, want %d", got, n)
	}
	got := seqs(pending(t, s, 0))
	if len(got) != n || !slices.IsSorted(got) {
		t.Fatalf("Pending after concurrent Creates: Seqs %v, want %d in order", got, n)
	}
}

func testConcurrentSame(t *testing.T, c *Config) {
	s := open(t, c)
	const n = 16
	recs := make([]*journal.Record, n)
	for i := range recs {
		recs[i] = newRecord(t, fmt.Sprint(i))
		recs[i].OperationID = "op-contended"
	}
	winner := -1
	for i, err := range concurrently(n, func(i int) error { return s.Create(ctx, recs[i]) }) {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("concurrent Creates of one operation ID: both %d and %d won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, journal.ErrNameTaken):
			t.Fatalf("concurrent Create %d: %v, want nil or journal.ErrNameTaken", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("concurrent Creates of one operation ID: none won")
	}
	same(t, "Get", mustGet(t, s, journal.Name{OperationID: "op-contended"}), recs[winner], withBody)
	if got := count(t, s); got != 1 {
		t.Fatalf("PendingCount = %d, want 1", got)
	}
}

// The Store keeps no memory of the record it was given: changing it after
// Create changes nothing stored.
func testCreateKeepsNoCallerMemory(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	want := deepCopy(rec)
	scribble(rec)
	same(t, "Get after the created record was changed", mustGet(t, s, journal.NameOf(want)), want, withBody)
}

func testGetUnknown(t *testing.T, c *Config) {
	s := open(t, c)
	for _, name := range []journal.Name{{OperationID: "op-none"}, {Key: "key-none"}} {
		if got := get(t, s, name); got != nil {
			t.Fatalf("Get(%s) in an empty store = %s, want nil", name, journal.NameOf(got))
		}
	}
	create(t, s, newRecord(t, "1"))
	create(t, s, newKeyed(t, "caller-key"))
	for _, name := range []journal.Name{{OperationID: "op-none"}, {Key: "key-none"}, {OperationID: "caller-key"}, {Key: "op-1"}} {
		if got := get(t, s, name); got != nil {
			t.Fatalf("Get(%s) = %s, want nil", name, journal.NameOf(got))
		}
	}
}

// What Get returns is the caller's: changing it changes nothing stored,
// nor the next Get's record.
func testGetReturnsCopies(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	want := deepCopy(rec)
	scribble(mustGet(t, s, journal.NameOf(rec)))
	same(t, "Get after a returned record was changed", mustGet(t, s, journal.NameOf(rec)), want, withBody)
	scribble(mustReload(t, s, rec))
	same(t, "Reload after a reloaded record was changed", mustReload(t, s, rec), want, withBody)
}
