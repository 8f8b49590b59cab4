// Namespaces share one schema's tables and never see each other's rows.

package pgjournal

import (
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

// Two namespaces in one schema, each with an operation of the same ID and
// the same caller's key: both are written, each sees and leases its own
// only, and pruning one leaves the other's rows.
func TestNamespacesAreIsolated(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	x := openTest(t, pool, Options{Schema: schema, Namespace: `ns "x"`})
	y := openTest(t, pool, Options{Schema: schema, Namespace: `ns 'y' ü`})
	mk := func(key string) *journal.Record {
		rec := pendingRec(t, "same-id")
		rec.Key, rec.CallerKey = key, true
		return rec
	}
	rx, ry := mk("same-key"), mk("same-key")
	ry.Body, ry.BodySHA256 = []byte(`{"other":true}`), journal.BodySum([]byte(`{"other":true}`))
	claimCreate(t, x, rx)
	claimCreate(t, y, ry) // x's live lease on its row does not hold y's back
	for _, c := range []struct {
		j    *Journal
		want *journal.Record
	}{{x, rx}, {y, ry}} {
		got, err := c.j.Get(bg, journal.NameOf(c.want))
		if err != nil || got == nil || got.BodySHA256 != c.want.BodySHA256 {
			t.Fatalf("%s: Get = %+v, %v; want its own record", c.j.opts.Namespace, got, err)
		}
		byKey, err := c.j.Get(bg, journal.Name{Key: "same-key"})
		if err != nil || byKey == nil || byKey.BodySHA256 != c.want.BodySHA256 {
			t.Fatalf("%s: Get by key = %+v, %v; want its own record", c.j.opts.Namespace, byKey, err)
		}
		if n, err := c.j.PendingCount(bg); err != nil || n != 1 {
			t.Fatalf("%s: PendingCount = %d, %v; want 1", c.j.opts.Namespace, n, err)
		}
	}
	// x settles its own; y's stays pending and listed by y only.
	if _, err := journal.Apply(rx, journal.EventSettle, journal.Change{Now: time.Now().Add(-time.Hour), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := x.Update(bg, rx, journal.Durable); err != nil {
		t.Fatal(err)
	}
	y.Release(journal.NameOf(ry))
	if got := listed(t, x); len(got) != 0 {
		t.Fatalf("x lists %v, want nothing (y's row is not x's)", got)
	}
	if got := listed(t, y); len(got) != 1 {
		t.Fatalf("y lists %v, want its own operation", got)
	}
	if n, err := y.Prune(time.Minute); err != nil || n != 0 {
		t.Fatalf("y's Prune deleted %d rows (%v), want 0: x's settled row is not y's", n, err)
	}
	if n, err := x.Prune(time.Minute); err != nil || n != 1 {
		t.Fatalf("x's Prune deleted %d rows (%v), want its settled one", n, err)
	}
	if got, err := y.Get(bg, journal.NameOf(ry)); err != nil || got == nil || got.State != journal.StatePending {
		t.Fatalf("y's operation after x pruned: %+v, %v; want pending", got, err)
	}
	if x.channel() == y.channel() {
		t.Fatal("x and y share a NOTIFY channel")
	}
}
