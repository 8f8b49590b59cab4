package pgjournal

import (
	"fmt"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

// stateInDB reads rec's row's state straight from the table, past any
// queued settle.
func stateInDB(t *testing.T, j *Journal, rec *journal.Record) journal.State {
	t.Helper()
	var st int16
	if err := j.pool.QueryRow(bg, j.sql(`SELECT state FROM {s}.operations WHERE namespace = $1 AND seq = $2`),
		j.opts.Namespace, int64(journal.RefOf(rec).Seq)).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return journal.State(st)
}

// settleDeferred applies a settle with status to rec and writes it Deferred:
// it is queued, and Update returns nil.
func settleDeferred(t *testing.T, j *Journal, rec *journal.Record, status int) {
	t.Helper()
	if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: status}); err != nil {
		t.Fatal(err)
	}
	if err := j.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatalf("a deferred settle: %v, want nil (it is queued)", err)
	}
}

// A retry (still pending) is written before Update returns; a deferred
// settle is queued, read by this Journal's Get at once, and written within
// settleDelay without anyone asking.
func TestDeferredSettleIsWrittenSoon(t *testing.T) {
	a, _, _ := pair(t)
	rec := pendingRec(t, "order-6")
	claimCreate(t, a, rec)
	if _, err := journal.Apply(rec, journal.EventRetry, journal.Change{Now: time.Now(), Status: 503}); err != nil {
		t.Fatal(err)
	}
	a.settleDelay = time.Hour // no timer write while the queue is checked
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	var attempts int
	if err := a.pool.QueryRow(bg, a.sql(`SELECT (record->>'attempts')::int FROM {s}.operations WHERE namespace = $1 AND seq = $2`),
		a.opts.Namespace, int64(journal.RefOf(rec).Seq)).Scan(&attempts); err != nil || attempts != rec.Attempts {
		t.Fatalf("a retry, which leaves the operation pending, was not written at once: %d attempts stored (%v), want %d", attempts, err, rec.Attempts)
	}
	settleDeferred(t, a, rec, 201)
	if got := stateInDB(t, a, rec); got != journal.StatePending {
		t.Fatalf("a deferred settle was written before Update returned: the row is %v", got)
	}
	if got, err := a.Get(bg, journal.NameOf(rec)); err != nil || got.State != journal.StateSettled {
		t.Fatalf("Get after the deferred settle: %+v, %v; want it settled", got, err)
	}

	a.settleDelay = settleDelay
	later := pendingRec(t, "order-6b")
	claimCreate(t, a, later)
	settleDeferred(t, a, later, 201)
	for deadline := time.Now().Add(10 * time.Second); stateInDB(t, a, later) != journal.StateSettled; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the deferred settle was not written within 10 s")
		}
	}
}

// Stats counts the write-ahead and the commits that wait for the flush:
// the create's batch and the settle's own batch at Flush.
func TestStatsCountsWaitingCommits(t *testing.T) {
	a, _, _ := pair(t)
	a.settleDelay = time.Hour
	rec := pendingRec(t, "order-7")
	before := a.Stats()
	claimCreate(t, a, rec) // no row yet: the claim writes nothing
	settleDeferred(t, a, rec, 201)
	if err := a.Flush(bg); err != nil {
		t.Fatal(err)
	}
	got := a.Stats()
	if got.WriteAheads-before.WriteAheads != 1 || got.Commits-before.Commits != 2 {
		t.Fatalf("Stats went from %+v to %+v: want 1 write-ahead and 2 waiting commits (the insert, the settle)", before, got)
	}
	if stateInDB(t, a, rec) != journal.StateSettled {
		t.Fatal("Flush did not write the queued settle")
	}
}

// A queued settle rides the next write-ahead's transaction: one commit for
// both, and the settle is written with it. A write-ahead refused (its name
// taken) still carries the settles queued before it.
func TestSettleRidesNextWriteAhead(t *testing.T) {
	a, _, _ := pair(t)
	a.settleDelay = time.Hour
	rec := pendingRec(t, "order-8")
	claimCreate(t, a, rec)
	settleDeferred(t, a, rec, 201)
	before := a.Stats()
	claimCreate(t, a, pendingRec(t, "order-9"))
	if got := a.Stats(); got.Commits-before.Commits != 1 {
		t.Fatalf("the write-ahead with a settle riding it made %d commits, want 1", got.Commits-before.Commits)
	}
	if stateInDB(t, a, rec) != journal.StateSettled {
		t.Fatal("the settle queued before a write-ahead did not ride it")
	}
	if n, err := a.renew(bg); err != nil || n != 1 {
		t.Fatalf("after the ride a renews %d leases (%v), want 1: order-9's, not the settled order-8's", n, err)
	}

	other := pendingRec(t, "order-10")
	claimCreate(t, a, other)
	settleDeferred(t, a, other, 201)
	if err := a.Create(bg, pendingRec(t, "order-10")); err == nil {
		t.Fatal("Create of a taken name succeeded")
	}
	if stateInDB(t, a, other) != journal.StateSettled {
		t.Fatal("a refused write-ahead did not carry the settle queued before it")
	}
}

// Until its queued settle is written, the row stays leased to this
// Journal, Release included: another instance cannot take it and send it
// again. This Journal's Pending does not list it.
func TestQueuedSettleKeepsLease(t *testing.T) {
	a, b, _ := pair(t)
	a.settleDelay = time.Hour
	rec := pendingRec(t, "order-11")
	name := journal.NameOf(rec)
	claimCreate(t, a, rec)
	settleDeferred(t, a, rec, 201)
	a.Release(name)
	if b.TryClaim(name) {
		t.Fatal("b took a row whose settle a has queued")
	}
	if ids := listed(t, a); len(ids) != 0 {
		t.Fatalf("a lists %v pending after its queued settle", ids)
	}
	if err := a.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if !b.TryClaim(name) {
		t.Fatal("b could not claim the settled operation once a wrote its settle")
	}
	b.Release(name)
}

// A Claim of an operation whose settle this Journal still has queued
// writes the settle first: the lease it takes is not then given up by that
// write. So a failed operation made pending again by a later call stays
// leased while that call sends it, and another instance cannot adopt it.
func TestClaimAfterQueuedSettleKeepsItsLease(t *testing.T) {
	a, b, _ := pair(t)
	a.settleDelay = time.Hour
	rec := pendingRec(t, "order-12")
	name := journal.NameOf(rec)
	claimCreate(t, a, rec)
	if _, err := journal.Apply(rec, journal.EventFail, journal.Change{Now: time.Now(), Error: "refused"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	a.Release(name)
	if err := a.Claim(bg, name); err != nil { // a later call of the same operation
		t.Fatal(err)
	}
	defer a.Release(name)
	got, err := a.Get(bg, name)
	if err != nil || got == nil || got.State != journal.StateFailed {
		t.Fatalf("Get after the claim: %+v, %v; want the failed record", got, err)
	}
	if _, err := journal.Apply(got, journal.EventRepend, journal.Change{Body: got.Body}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, got, journal.Durable); err != nil {
		t.Fatalf("the repend: %v", err)
	}
	if b.TryClaim(name) {
		b.Release(name)
		t.Fatal("b took the operation a made pending again and is sending: a's lease was lost to its own queued settle")
	}
}

// A batch of queued final states is written as a lone Update would write
// each: a settled row loses its body, a failed or expired one keeps it, and
// none stays leased. A batch of settles alone takes the shorter statement
// (settleUpdate), one with another final state the general one
// (finalUpdate); both are checked row by row.
func TestQueuedFinalStatesWriteTheirRows(t *testing.T) {
	a, _, _ := pair(t)
	a.settleDelay = time.Hour
	type row struct {
		state   journal.State
		body    bool
		leased  bool
		attempt int
	}
	read := func(rec *journal.Record) row {
		t.Helper()
		var r row
		var st int16
		if err := a.pool.QueryRow(bg, a.sql(`SELECT state, body IS NOT NULL, leased_until IS NOT NULL, (record->>'attempts')::int
			FROM {s}.operations WHERE namespace = $1 AND seq = $2`), a.opts.Namespace, int64(journal.RefOf(rec).Seq)).
			Scan(&st, &r.body, &r.leased, &r.attempt); err != nil {
			t.Fatal(err)
		}
		r.state = journal.State(st)
		return r
	}
	for _, events := range [][]journal.Event{
		{journal.EventSettle, journal.EventSettle},
		{journal.EventSettle, journal.EventFail, journal.EventExpire},
	} {
		var recs []*journal.Record
		for i, ev := range events {
			rec := pendingRec(t, fmt.Sprintf("final-%d-%d-%s", len(events), i, ev))
			claimCreate(t, a, rec)
			rec.Attempts = 3
			if _, err := journal.Apply(rec, ev, journal.Change{Now: time.Now(), Status: 201, Error: "gave up"}); err != nil {
				t.Fatal(err)
			}
			if err := a.Update(bg, rec, journal.Deferred); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
		}
		if err := a.Flush(bg); err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			want := row{state: rec.State, body: rec.State != journal.StateSettled, attempt: 3}
			if got := read(rec); got != want {
				t.Errorf("%v of %v: the row is %+v, want %+v", rec.State, events, got, want)
			}
		}
	}
	if got := a.Stats().FencedSettles; got != 0 {
		t.Errorf("%d settles fenced, want none", got)
	}
}
