// All lists what another instance leases; Namespaces names the namespaces
// of a schema, and creates nothing.

package pgjournal

import (
	"errors"
	"slices"
	"testing"

	"github.com/idem-go/idem/journal"
)

// An operation another instance holds is not Pending for this one (it may
// not send it), but an inspection through All still shows it, and takes
// nothing: the holder keeps its lease.
func TestAllListsWhatAnotherInstanceLeases(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "held-by-a")
	claimCreate(t, a, rec)
	if got := listed(t, b); len(got) != 0 {
		t.Fatalf("b's Pending lists %v, want nothing: a leases it", got)
	}
	var got []string
	for r, err := range b.All(bg) {
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Body) != 0 {
			t.Fatalf("All yielded a body: %q", r.Body)
		}
		got = append(got, r.OperationID+" "+r.State.String())
	}
	if want := []string{"held-by-a pending"}; !slices.Equal(got, want) {
		t.Fatalf("b's All = %v, want %v", got, want)
	}
	if b.TryClaim(journal.NameOf(rec)) {
		t.Fatal("b claimed what a leases, after listing it")
	}
}

// Namespaces lists every namespace a Journal was opened on, empty ones
// included, sorted, and on a schema without a journal returns
// ErrNoJournal without creating it.
func TestNamespaces(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	if _, err := Namespaces(bg, pool, &Options{Schema: schema}); !errors.Is(err, ErrNoJournal) {
		t.Fatalf("Namespaces of a schema without a journal: %v, want ErrNoJournal", err)
	}
	var exists bool
	if err := pool.QueryRow(bg, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil || exists {
		t.Fatalf("schema %s exists = %v (%v) after Namespaces: it must create nothing", schema, exists, err)
	}
	payments := openTest(t, pool, Options{Schema: schema, Namespace: "payments"})
	claimCreate(t, payments, pendingRec(t, "order-1"))
	openTest(t, pool, Options{Schema: schema, Namespace: "Refunds ü"}) // no operation yet
	openTest(t, pool, Options{Schema: schema})                         // DefaultNamespace
	got, err := Namespaces(bg, pool, &Options{Schema: schema, Namespace: "ignored"})
	if want := []string{"Refunds ü", DefaultNamespace, "payments"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Namespaces = %q, %v; want %q", got, err, want)
	}
	if _, err := Namespaces(bg, nil, &Options{Schema: schema}); !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Namespaces with a nil pool: %v, want ErrInvalidOptions", err)
	}
}
