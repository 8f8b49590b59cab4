// The journaltest conformance suite against the PostgreSQL Journal: every
// subtest in a namespace of its own, in one schema; reopened by closing
// the Journal and opening the namespace again (with Options.Encryption for
// the sealing subtests); damaged by writing other bytes over a row's body;
// read raw as psql prints the namespace's rows.

package pgjournal

import (
	"context"
	"testing"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/journaltest"
	"github.com/idem-go/idem/journal/seal"
)

func TestJournalConformance(t *testing.T) {
	var _ journaltest.Pruner = (*Journal)(nil)
	pool := testPool(t)
	schema := testSchema(t, pool)
	if err := Migrate(context.Background(), pool, &Options{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T, ns string, k *seal.Keyring) journal.Store {
		j, err := Open(context.Background(), pool, &Options{Schema: schema, Namespace: ns, Encryption: k})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	journaltest.Run(t, journaltest.Config{
		Open: func(t *testing.T) journal.Store { return open(t, namespace(t), nil) },
		Reopen: func(t *testing.T, old journal.Store) journal.Store {
			j := old.(*Journal)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, j.opts.Namespace, nil)
		},
		Damage: func(t *testing.T, s journal.Store, rec *journal.Record) journal.Store {
			j := s.(*Journal)
			_, err := pool.Exec(context.Background(), j.sql(`UPDATE {s}.operations SET body = $3
				WHERE namespace = $1 AND seq = $2`), j.opts.Namespace, int64(journal.RefOf(rec).Seq), []byte(`{"amount":999999}`))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Seal: func(t *testing.T, old journal.Store, k *seal.Keyring) journal.Store {
			if old == nil {
				return open(t, namespace(t), k)
			}
			j := old.(*Journal)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, j.opts.Namespace, k)
		},
		Raw: func(t *testing.T, s journal.Store) []byte {
			return psqlRows(t, pool, schema, s.(*Journal).opts.Namespace)
		},
	})
}
