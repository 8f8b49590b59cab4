// This file checks Update and Flush: what each Durability promises, the
// copies, and the transitions that take a record out of the pending ones
// (settle, fail, expire) and back (repend).

package journaltest

import (
	"slices"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

var updateTests = []subtest{
	{"Update/DeferredVisibleAtOnce", testDeferredVisible},
	{"Update/DeferredDurableAfterFlush", testDeferredFlush},
	{"Update/DeferredDurableAfterClose", testDeferredClose},
	{"Update/Durable", testDurable},
	{"Update/LastWriteWins", testLastWriteWins},
	{"Update/KeepsNoCallerMemory", testUpdateKeepsNoCallerMemory},
	{"Update/Settle", testSettle},
	{"Update/Expire", testExpire},
	{"Update/FailThenRepend", testRepend},
	{"Flush/Empty", testFlushEmpty},
}

// reload returns Reload(rec), failing t on an error.
func reload(t *testing.T, s journal.Store, rec *journal.Record) *journal.Record {
	t.Helper()
	got, err := s.Reload(ctx, rec)
	if err != nil {
		t.Fatalf("Reload(%s): %v", journal.NameOf(rec), err)
	}
	return got
}

// mustReload is reload for a record that must be there.
func mustReload(t *testing.T, s journal.Store, rec *journal.Record) *journal.Record {
	t.Helper()
	got := reload(t, s, rec)
	if got == nil {
		t.Fatalf("Reload(%s) = nil, want the record", journal.NameOf(rec))
	}
	return got
}

// retry records a failed attempt on rec, as the Transport does before it
// waits to send rec again.
func retry(t *testing.T, rec *journal.Record, status int) {
	t.Helper()
	at := now()
	rec.Attempts++
	rec.LastAttempt = at
	apply(t, rec, journal.EventRetry, journal.Change{Now: at, Status: status, Next: at.Add(time.Minute), Error: "idem: attempt failed"})
}

// checkEverywhere checks that Get, Reload and Pending all read want.
func checkEverywhere(t *testing.T, s journal.Store, want *journal.Record) {
	t.Helper()
	same(t, "Get", mustGet(t, s, journal.NameOf(want)), want, withBody)
	same(t, "Reload", mustReload(t, s, want), want, withBody)
	var listed *journal.Record
	for _, r := range pending(t, s, 0) {
		if journal.RefOf(r).Seq == journal.RefOf(want).Seq {
			listed = r
		}
	}
	if want.State != journal.StatePending {
		if listed != nil {
			t.Fatalf("Pending lists %s, which is %v", journal.NameOf(want), want.State)
		}
		return
	}
	same(t, "Pending", listed, want, withoutBody)
}

func testDeferredVisible(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	retry(t, rec, 503)
	update(t, s, rec, journal.Deferred)
	checkEverywhere(t, s, rec)
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	checkEverywhere(t, s, rec)
}

func testDeferredFlush(t *testing.T, c *Config) {
	needReopen(t, c)
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	retry(t, rec, 503)
	update(t, s, rec, journal.Deferred)
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	s.reopen()
	checkEverywhere(t, s, rec)
}

// Close makes deferred updates durable.
func testDeferredClose(t *testing.T, c *Config) {
	needReopen(t, c)
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	settled := create(t, s, newRecord(t, "2"))
	retry(t, rec, 503)
	update(t, s, rec, journal.Deferred)
	apply(t, settled, journal.EventSettle, journal.Change{Now: now(), Status: 201})
	update(t, s, settled, journal.Deferred)
	s.reopen()
	checkEverywhere(t, s, rec)
	checkEverywhere(t, s, settled)
}

func testDurable(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	retry(t, rec, 502)
	update(t, s, rec, journal.Durable)
	checkEverywhere(t, s, rec)
	if c.Reopen != nil {
		s.reopen()
		checkEverywhere(t, s, rec)
	}
}

func testLastWriteWins(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	for _, d := range []journal.Durability{journal.Deferred, journal.Durable, journal.Deferred, journal.Deferred} {
		retry(t, rec, 500+rec.Attempts)
		update(t, s, rec, d)
	}
	checkEverywhere(t, s, rec)
	if c.Reopen != nil {
		s.reopen()
		checkEverywhere(t, s, rec)
	}
}

// Update keeps no memory of the record it was given either, and what reads
// return while an update is deferred is the caller's too.
func testUpdateKeepsNoCallerMemory(t *testing.T, c *Config) {
	for _, d := range []journal.Durability{journal.Deferred, journal.Durable} {
		s := open(t, c)
		rec := create(t, s, newRecord(t, "1"))
		retry(t, rec, 503)
		update(t, s, rec, d)
		want := deepCopy(rec)
		scribble(rec)
		same(t, "Get after the updated record was changed", mustGet(t, s, journal.NameOf(want)), want, withBody)
		scribble(mustGet(t, s, journal.NameOf(want)))
		same(t, "Get after a returned record was changed", mustGet(t, s, journal.NameOf(want)), want, withBody)
		scribble(mustReload(t, s, want))
		same(t, "Reload after a reloaded record was changed", mustReload(t, s, want), want, withBody)
	}
}

func testSettle(t *testing.T, c *Config) {
	for _, d := range []journal.Durability{journal.Deferred, journal.Durable} {
		s := open(t, c)
		other := create(t, s, newRecord(t, "0"))
		rec := create(t, s, newRecord(t, "1"))
		retry(t, rec, 503)
		update(t, s, rec, journal.Deferred)
		apply(t, rec, journal.EventSettle, journal.Change{Now: now(), Status: 201})
		update(t, s, rec, d)
		if n := count(t, s); n != 1 {
			t.Fatalf("PendingCount = %d after a settle (%v), want 1", n, d)
		}
		checkEverywhere(t, s, rec) // settled, without its body
		checkEverywhere(t, s, other)
		if c.Reopen != nil {
			s.reopen()
			checkEverywhere(t, s, rec)
		}
	}
}

func testExpire(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	apply(t, rec, journal.EventExpire, journal.Change{Now: now()})
	update(t, s, rec, journal.Deferred)
	if n := count(t, s); n != 0 {
		t.Fatalf("PendingCount = %d after an expiry, want 0", n)
	}
	checkEverywhere(t, s, rec)
}

// A failed operation leaves the pending ones with its body; made pending
// again (EventRepend, written Durable) it is listed again, in its place,
// and reads with its body.
func testRepend(t *testing.T, c *Config) {
	s := open(t, c)
	before := create(t, s, newRecord(t, "0"))
	rec := create(t, s, newRecord(t, "1"))
	after := create(t, s, newRecord(t, "2"))
	sent := rec.Body
	apply(t, rec, journal.EventFail, journal.Change{Now: now(), Error: "idem: invalid URL"})
	update(t, s, rec, journal.Deferred)
	if n := count(t, s); n != 2 {
		t.Fatalf("PendingCount = %d after a failure, want 2", n)
	}
	checkEverywhere(t, s, rec)

	// The Transport repends the record it holds, or, after a restart, one
	// it read again: both carry the body.
	rec = mustGet(t, s, journal.NameOf(rec))
	apply(t, rec, journal.EventRepend, journal.Change{Now: now(), Body: sent})
	update(t, s, rec, journal.Durable)
	if n := count(t, s); n != 3 {
		t.Fatalf("PendingCount = %d after a repend, want 3", n)
	}
	checkEverywhere(t, s, rec)
	if got, want := names(pending(t, s, 0)), names([]*journal.Record{before, rec, after}); !slices.Equal(got, want) {
		t.Fatalf("Pending after a repend: %v, want %v (creation order)", got, want)
	}
	if c.Reopen != nil {
		s.reopen()
		checkEverywhere(t, s, rec)
	}
}

func testFlushEmpty(t *testing.T, c *Config) {
	s := open(t, c)
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush of an empty store: %v", err)
	}
	rec := create(t, s, newRecord(t, "1"))
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush with nothing deferred: %v", err)
	}
	checkEverywhere(t, s, rec)
}

// names returns each record's name, in order.
func names(recs []*journal.Record) []journal.Name {
	out := make([]journal.Name, len(recs))
	for i, r := range recs {
		out[i] = journal.NameOf(r)
	}
	return out
}
