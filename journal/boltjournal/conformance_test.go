// The journaltest conformance suite against the Journal: each subtest
// on a file of its own, reopened by closing it and opening the path again
// (with Options.Encryption for the sealing subtests), damaged by writing
// other bytes over a record's body in the file, and read raw as the file's
// bytes.

package boltjournal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/journaltest"
	"github.com/idem-go/idem/journal/seal"
	bolt "go.etcd.io/bbolt"
)

func TestJournalConformance(t *testing.T) {
	var _ journaltest.Pruner = (*Journal)(nil)
	open := func(t *testing.T, path string, k *seal.Keyring) journal.Store {
		t.Helper()
		j, err := Open(path, &Options{Encryption: k})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	journaltest.Run(t, journaltest.Config{
		Open: func(t *testing.T) journal.Store {
			return open(t, filepath.Join(t.TempDir(), "conformance.journal"), nil)
		},
		Reopen: func(t *testing.T, old journal.Store) journal.Store {
			j := old.(*Journal)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, j.Path(), nil)
		},
		Damage: func(t *testing.T, s journal.Store, rec *journal.Record) journal.Store {
			j := s.(*Journal)
			err := j.db.Update(func(tx *bolt.Tx) error {
				return setStoredBodyTx(tx, idKey(journal.RefOf(rec).Seq), []byte(`{"amount":999999}`))
			})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Seal: func(t *testing.T, old journal.Store, k *seal.Keyring) journal.Store {
			if old == nil {
				return open(t, filepath.Join(t.TempDir(), "conformance.journal"), k)
			}
			j := old.(*Journal)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, j.Path(), k)
		},
		Raw: func(t *testing.T, s journal.Store) []byte {
			b, err := os.ReadFile(s.(*Journal).Path())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}
