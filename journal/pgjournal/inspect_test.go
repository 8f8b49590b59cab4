// Records and SchemaVersion read a journal without changing the database.

package pgjournal

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

// On a schema without a journal, SchemaVersion is 0 and Records yields
// ErrNoJournal, and neither creates the schema.
func TestRecordsOfNoJournal(t *testing.T) {
	pool := testPool(t)
	opts := &Options{Schema: testSchema(t, pool), Namespace: "x"}
	if v, err := SchemaVersion(bg, pool, opts); err != nil || v != 0 {
		t.Fatalf("SchemaVersion = %d, %v; want 0, nil", v, err)
	}
	n := 0
	for rec, err := range Records(bg, pool, opts, false) {
		n++
		if rec != nil || !errors.Is(err, ErrNoJournal) {
			t.Fatalf("Records yielded %v, %v; want ErrNoJournal", rec, err)
		}
	}
	if n != 1 {
		t.Fatalf("Records yielded %d times, want once (the error)", n)
	}
	var exists bool
	if err := pool.QueryRow(bg, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, opts.Schema).Scan(&exists); err != nil || exists {
		t.Fatalf("schema %s exists = %v (%v) after reading: reads must create nothing", opts.Schema, exists, err)
	}
	for _, err := range Records(bg, nil, opts, false) {
		if !errors.Is(err, journal.ErrInvalidOptions) {
			t.Fatalf("Records with a nil pool: %v, want ErrInvalidOptions", err)
		}
	}
}

// Records lists one namespace's operations, every state, in creation
// order, with their bodies only when asked, across pages, and takes no
// lease: another instance can still claim what it listed.
func TestRecordsListsEveryState(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	opts := Options{Schema: schema, Namespace: namespace(t)}
	j := openTest(t, pool, opts)
	other := openTest(t, pool, Options{Schema: schema, Namespace: "other"})
	claimCreate(t, other, pendingRec(t, "not-mine"))
	if v, err := SchemaVersion(bg, pool, &opts); err != nil || v != schemaVersion {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, schemaVersion)
	}
	var want []string
	for i := range inspectPage + 3 { // more than one page
		rec := pendingRec(t, fmt.Sprintf("order-%03d", i))
		claimCreate(t, j, rec)
		want = append(want, rec.OperationID)
		if i == 1 {
			if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
				t.Fatal(err)
			}
			if err := j.Update(bg, rec, journal.Durable); err != nil {
				t.Fatal(err)
			}
		} else {
			j.Release(journal.NameOf(rec))
		}
	}
	before := leases(t, j)
	for _, withBody := range []bool{false, true} {
		var got []string
		for rec, err := range Records(bg, pool, &opts, withBody) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rec.OperationID)
			switch {
			case rec.OperationID == want[1] && (rec.State != journal.StateSettled || rec.Status != 201):
				t.Errorf("%s: state %v status %d, want settled 201", rec.OperationID, rec.State, rec.Status)
			case rec.OperationID != want[1] && rec.State != journal.StatePending:
				t.Errorf("%s: state %v, want pending", rec.OperationID, rec.State)
			case rec.State == journal.StatePending && withBody != (len(rec.Body) > 0):
				t.Errorf("%s: body of %d bytes with withBody %v", rec.OperationID, len(rec.Body), withBody)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Records (withBody %v) listed %d operations, want %d in creation order", withBody, len(got), len(want))
		}
	}
	if after := leases(t, j); after != before {
		t.Fatalf("leases (rows, epochs) went from %v to %v: reading takes no lease", before, after)
	}
}

// leases returns how many of j's namespace's rows are leased, and the sum of
// their epochs.
func leases(t *testing.T, j *Journal) [2]int64 {
	t.Helper()
	var l [2]int64
	err := j.pool.QueryRow(bg, j.sql(`SELECT count(*), coalesce(sum(epoch), 0) FROM {s}.operations
		WHERE namespace = $1 AND leased_until > now()`), j.opts.Namespace).Scan(&l[0], &l[1])
	if err != nil {
		t.Fatal(err)
	}
	return l
}
