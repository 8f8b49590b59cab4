// Every write path of a holder that stalled past its lease is fenced once
// another instance adopted the operation (S25), whatever state it writes.

package pgjournal

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

func TestStalledHolderIsFencedOnEveryPath(t *testing.T) {
	for _, ev := range []journal.Event{journal.EventRetry, journal.EventSettle, journal.EventFail, journal.EventExpire} {
		t.Run(ev.String(), func(t *testing.T) {
			a, b, _ := pair(t)
			rec := pendingRec(t, "op")
			name := journal.NameOf(rec)
			claimCreate(t, a, rec)
			stall(t, a, rec)
			if !b.TryClaim(name) {
				t.Fatal("b could not adopt")
			}
			defer b.Release(name)
			adopted, err := b.Reload(bg, rec)
			if err != nil || adopted == nil {
				t.Fatalf("Reload: %v, %v", adopted, err)
			}
			late := *rec
			if _, err := journal.Apply(&late, ev, journal.Change{Now: time.Now(), Status: 500, Next: time.Now(), Error: "late"}); err != nil {
				t.Fatal(err)
			}
			if err := a.Update(bg, &late, journal.Durable); !errors.Is(err, ErrFenced) {
				t.Fatalf("a's late %v: %v, want ErrFenced", ev, err)
			}
			if ev != journal.EventRetry { // a final state: queued, then fenced when written
				fencedDeferred(t, a, &late)
			}
			if ev == journal.EventFail { // a failed one made pending again
				if _, err := journal.Apply(&late, journal.EventRepend, journal.Change{Body: late.Body}); err != nil {
					t.Fatal(err)
				}
				if err := a.Update(bg, &late, journal.Durable); !errors.Is(err, ErrFenced) {
					t.Fatalf("a's late repend: %v, want ErrFenced", err)
				}
			}
			// a's renewals, its Release and its Close leave b's lease alone.
			if n, err := a.renew(bg); err != nil || n != 0 {
				t.Fatalf("a renewed %d leases (%v), want 0", n, err)
			}
			a.Release(name)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := b.Reload(bg, rec)
			if err != nil || got == nil || got.State != journal.StatePending || got.Attempts != adopted.Attempts ||
				journal.RefOf(got).Part != journal.RefOf(adopted).Part {
				t.Fatalf("after a's late writes: %+v, %v; want b's pending record as b adopted it", got, err)
			}
			var holder string
			var live bool
			if err := b.pool.QueryRow(bg, b.sql(`SELECT holder, leased_until > now() FROM {s}.operations
				WHERE namespace = $1 AND seq = $2`), b.opts.Namespace, int64(journal.RefOf(rec).Seq)).Scan(&holder, &live); err != nil {
				t.Fatal(err)
			}
			if holder != b.holder || !live {
				t.Fatalf("after a's Release and Close the row is leased to %s (live %v), want b's live lease", holder, live)
			}
		})
	}
}

// A stalled holder's late settle is fenced by the epoch alone once the
// adopter settled the operation and gave its lease up: the row is then
// leased by no one, so only the epoch tells a's write from b's. Deferred
// settles share one batched UPDATE (settles.go); each row keeps its own
// condition.
func TestLateSettleAfterAdopterSettledIsFenced(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "order-late")
	name := journal.NameOf(rec)
	claimCreate(t, a, rec)
	stall(t, a, rec)
	if !b.TryClaim(name) {
		t.Fatal("b could not adopt")
	}
	adopted, err := b.Reload(bg, rec)
	if err != nil || adopted == nil {
		t.Fatalf("Reload: %v, %v", adopted, err)
	}
	if _, err := journal.Apply(adopted, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(bg, adopted, journal.Deferred); err != nil {
		t.Fatalf("b's settle: %v", err)
	}
	b.Release(name)
	late := *rec
	if _, err := journal.Apply(&late, journal.EventSettle, journal.Change{Now: time.Now(), Status: 500}); err != nil {
		t.Fatal(err)
	}
	fencedDeferred(t, a, &late)
	got, err := b.Reload(bg, rec)
	if err != nil || got == nil || got.Status != 201 {
		t.Fatalf("after a's late settle: %+v, %v; want b's settled status 201", got, err)
	}
}

// fencedDeferred writes rec, in a final state, Deferred from j, which
// queues it (nil), and then has it written: the write must change
// nothing, and count as fenced.
func fencedDeferred(t *testing.T, j *Journal, rec *journal.Record) {
	t.Helper()
	before := j.Stats().FencedSettles
	if err := j.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatalf("a deferred %v: %v, want nil (queued)", rec.State, err)
	}
	if err := j.Flush(bg); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if n := j.Stats().FencedSettles - before; n != 1 {
		t.Fatalf("the late deferred %v counted %d fenced settles, want 1", rec.State, n)
	}
}
