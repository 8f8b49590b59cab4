// Tests of leases across instances: two Journals on one namespace, as two
// instances of a service would be. A stall past the lease is simulated by
// moving the row's leased_until into the past on the database's clock.

package pgjournal

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5/pgxpool"
)

var bg = context.Background()

// pair opens two Journals on one new namespace.
func pair(t *testing.T) (a, b *Journal, pool *pgxpool.Pool) {
	t.Helper()
	pool = testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t)}
	return openTest(t, pool, opts), openTest(t, pool, opts), pool
}

// pendingRec returns a new pending record for the operation ID id.
func pendingRec(t *testing.T, id string) *journal.Record {
	t.Helper()
	body := []byte(`{"amount":100,"reference":"` + id + `"}`)
	rec := &journal.Record{Key: "key-" + id, OperationID: id, Method: http.MethodPost,
		URL: "http://127.0.0.1:1/payments", Body: body, BodySHA256: journal.BodySum(body)}
	if _, err := journal.Apply(rec, journal.EventCreate, journal.Change{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return rec
}

// claimCreate claims rec's name in j and creates rec, as the Transport
// does before it sends a new operation; the row is then leased to j.
func claimCreate(t *testing.T, j *Journal, rec *journal.Record) {
	t.Helper()
	if err := j.Claim(bg, journal.NameOf(rec)); err != nil {
		t.Fatal(err)
	}
	if err := j.Create(bg, rec); err != nil {
		t.Fatal(err)
	}
}

// stall makes j's lease on rec's row run out now, as if j had stalled (a
// GC pause, a frozen VM) past it.
func stall(t *testing.T, j *Journal, rec *journal.Record) {
	t.Helper()
	tag, err := j.pool.Exec(bg, j.sql(`UPDATE {s}.operations SET leased_until = now() - interval '1 second'
		WHERE namespace = $1 AND seq = $2 AND holder = $3`), j.opts.Namespace, int64(journal.RefOf(rec).Seq), j.holder)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("stall: %v, %d rows (want 1: the row leased to this Journal)", err, tag.RowsAffected())
	}
}

// listed returns the operation IDs j.Pending yields.
func listed(t *testing.T, j *Journal) []string {
	t.Helper()
	var ids []string
	for rec, err := range j.Pending(bg, 0) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.OperationID)
	}
	return ids
}

// S25: an instance stalls past its lease; another adopts the operation and
// settles it; the first's late writes change nothing.
func TestS25StalledHolderIsFenced(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "order-1")
	claimCreate(t, a, rec)
	name := journal.NameOf(rec)
	if b.TryClaim(name) {
		t.Fatal("b claimed an operation a leases and is sending")
	}
	if got := listed(t, b); len(got) != 0 {
		t.Fatalf("b lists %v, leased to a live instance; want none", got)
	}

	stall(t, a, rec)
	if got := listed(t, b); len(got) != 1 || got[0] != "order-1" {
		t.Fatalf("b lists %v after a's lease ran out, want [order-1]", got)
	}
	if !b.TryClaim(name) {
		t.Fatal("b could not adopt an operation whose lease ran out")
	}
	adopted, err := b.Reload(bg, rec)
	if err != nil || adopted == nil {
		t.Fatalf("Reload: %v, %v", adopted, err)
	}
	if journal.RefOf(adopted).Part <= journal.RefOf(rec).Part {
		t.Fatalf("adoption left the epoch at %d (was %d): a's writes would not be fenced",
			journal.RefOf(adopted).Part, journal.RefOf(rec).Part)
	}
	if _, err := journal.Apply(adopted, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(bg, adopted, journal.Durable); err != nil {
		t.Fatalf("the adopter's settle: %v", err)
	}
	b.Release(name)

	// a wakes up and writes what it saw: a retry, then a settle with
	// another status. Both are fenced.
	late := *rec
	if _, err := journal.Apply(&late, journal.EventRetry, journal.Change{Now: time.Now(), Status: 503}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, &late, journal.Durable); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's late retry: %v, want ErrFenced", err)
	}
	if _, err := journal.Apply(&late, journal.EventSettle, journal.Change{Now: time.Now(), Status: 500}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, &late, journal.Durable); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's late settle: %v, want ErrFenced", err)
	}
	got, err := a.Get(bg, name)
	if err != nil || got == nil {
		t.Fatalf("Get: %v, %v", got, err)
	}
	if got.State != journal.StateSettled || got.Status != 201 {
		t.Fatalf("after a's late writes the operation is %v with status %d, want the adopter's settled 201", got.State, got.Status)
	}
	a.Release(name) // a's stale lease is not b's: nothing changes
	if !b.TryClaim(name) {
		t.Fatal("a's Release of a lease it lost freed or took b's row")
	}
	b.Release(name)
}

// Adoption does not depend on which instance wrote the row (S27): a third
// Journal, opened after the writer stalled, adopts it too.
func TestS27AnyInstanceAdopts(t *testing.T) {
	a, _, pool := pair(t)
	rec := pendingRec(t, "order-2")
	claimCreate(t, a, rec)
	stall(t, a, rec)
	c := openTest(t, pool, a.opts) // a new instance, a new holder identity
	if !c.TryClaim(journal.NameOf(rec)) {
		t.Fatal("a newly opened instance could not adopt an expired lease")
	}
	c.Release(journal.NameOf(rec))
}

// Close gives up the Journal's leases, so another instance need not wait
// for them to run out.
func TestCloseReleasesLeases(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "order-3")
	claimCreate(t, a, rec)
	if b.TryClaim(journal.NameOf(rec)) {
		t.Fatal("b claimed a row a leases")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !b.TryClaim(journal.NameOf(rec)) {
		t.Fatal("b could not claim a row whose holder closed")
	}
	b.Release(journal.NameOf(rec))
}

// Release gives the row up at once; a Claim waiting for it then succeeds.
func TestClaimWaitsForRelease(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "order-4")
	claimCreate(t, a, rec)
	name := journal.NameOf(rec)
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	err := b.Claim(ctx, name)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim of a row another live instance leases: %v, want the context's deadline", err)
	}
	a.Release(name)
	ctx, cancel = context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if err := b.Claim(ctx, name); err != nil {
		t.Fatalf("Claim after the holder released: %v", err)
	}
	b.Release(name)
}

// A minted key (no operation ID) is leased like any other operation.
func TestMintedKeyIsLeased(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "x")
	rec.OperationID = ""
	claimCreate(t, a, rec)
	if b.TryClaim(journal.NameOf(rec)) {
		t.Fatal("b claimed a minted-key operation a leases")
	}
}

// renew extends the leases the Journal holds, on the database's clock, and
// not one it lost.
func TestRenew(t *testing.T) {
	a, b, _ := pair(t)
	kept, lost := pendingRec(t, "kept"), pendingRec(t, "lost")
	for _, r := range []*journal.Record{kept, lost} {
		claimCreate(t, a, r)
	}
	stall(t, a, lost)
	if !b.TryClaim(journal.NameOf(lost)) {
		t.Fatal("b could not adopt")
	}
	_, err := a.pool.Exec(bg, a.sql(`UPDATE {s}.operations SET leased_until = now() + interval '10 milliseconds'
		WHERE namespace = $1 AND seq = $2`), a.opts.Namespace, int64(journal.RefOf(kept).Seq))
	if err != nil {
		t.Fatal(err)
	}
	n, err := a.renew(bg)
	if err != nil || n != 1 {
		t.Fatalf("renew: %d rows, %v; want 1 (the lease a still holds)", n, err)
	}
	var left time.Duration
	err = a.pool.QueryRow(bg, a.sql(`SELECT extract(epoch FROM leased_until - now()) * 1e9 FROM {s}.operations
		WHERE namespace = $1 AND seq = $2`), a.opts.Namespace, int64(journal.RefOf(kept).Seq)).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	if left < a.opts.Lease/2 {
		t.Fatalf("after renew the lease has %v left, want about %v", left, a.opts.Lease)
	}
}

// A write that makes the operation final gives its lease up with it: no
// renewals after, and no round trip at Release.
func TestFinalUpdateReleasesLease(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "order-5")
	claimCreate(t, a, rec)
	if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(bg); err != nil { // the queued settle is written
		t.Fatal(err)
	}
	if n, err := a.renew(bg); err != nil || n != 0 {
		t.Fatalf("renew after the settle: %d leases (%v), want none", n, err)
	}
	if !b.TryClaim(journal.NameOf(rec)) {
		t.Fatal("b could not claim a settled operation a no longer leases")
	}
	b.Release(journal.NameOf(rec))
	a.Release(journal.NameOf(rec))
}

// An instance whose Claim found no row (claimed in its process only) and
// whose Get then finds the row another instance created and leases
// meanwhile waits in Get for that lease, as Claim would have, and cannot
// change the row: it is at the epoch it read, but the lease is the
// other's.
func TestUpdateOfAnotherLiveInstancesRowIsFenced(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "order-6")
	name := journal.NameOf(rec)
	if err := a.Claim(bg, name); err != nil { // no row yet: in a's process only
		t.Fatal(err)
	}
	defer a.Release(name)
	claimCreate(t, b, rec) // b writes it, leased to b, and is sending it
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	seen, err := a.Get(ctx, name)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a's Get of a row b created after a's Claim and leases: %v, %v; want to wait for b's lease", seen, err)
	}
	late := *rec // the row as a would have read it
	if _, err := journal.Apply(&late, journal.EventSettle, journal.Change{Now: time.Now(), Status: 500}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, &late, journal.Durable); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's settle of a row b leases: %v, want ErrFenced", err)
	}
	fencedDeferred(t, a, &late)
	got, err := b.Reload(bg, rec)
	if err != nil || got == nil || got.State != journal.StatePending {
		t.Fatalf("after a's write the row is %+v (%v), want b's pending operation untouched", got, err)
	}
	// b's own outcome is written; once b gives the row up, a's Get takes it.
	if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(bg, rec, journal.Durable); err != nil {
		t.Fatalf("b's settle: %v", err)
	}
	b.Release(name)
	ctx, cancel = context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	seen, err = a.Get(ctx, name)
	if err != nil || seen == nil || seen.State != journal.StateSettled || seen.Status != 201 {
		t.Fatalf("a's Get after b settled: %+v, %v; want b's settled 201", seen, err)
	}
	if b.TryClaim(name) {
		t.Fatal("b claimed the row a's Get leased")
	}
}

// A renewal that read the Journal's leases just before a final Update or a
// Release gave one up, and runs just after, does not take that row again:
// it would stay leased to an instance that forgot it, keeping every other
// instance off it for a whole Lease. The interleaving is replayed by
// putting the given-up lease back where renew reads it.
func TestRenewDoesNotRetakeAGivenUpLease(t *testing.T) {
	a, b, _ := pair(t)
	for _, settle := range []bool{true, false} {
		rec := pendingRec(t, map[bool]string{true: "settled", false: "released"}[settle])
		name := journal.NameOf(rec)
		claimCreate(t, a, rec)
		a.mu.Lock()
		seen := a.leases[name] // what the heartbeat's renew read
		a.mu.Unlock()
		if settle {
			if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
				t.Fatal(err)
			}
			if err := a.Update(bg, rec, journal.Deferred); err != nil {
				t.Fatal(err)
			}
			if err := a.Flush(bg); err != nil {
				t.Fatal(err)
			}
		}
		a.Release(name)
		a.noteLease(name, seen)
		if n, err := a.renew(bg); err != nil || n != 0 {
			t.Fatalf("settle %v: renew took %d given-up leases again (%v), want 0", settle, n, err)
		}
		a.forgetLease(name)
		if !b.TryClaim(name) {
			t.Fatalf("settle %v: b cannot claim the row a gave up", settle)
		}
		b.Release(name)
	}
}
