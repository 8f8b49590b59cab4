// The conformance suite against the Store in memory, with a damage hook that
// reaches into its records.

package memjournal

import (
	"testing"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/journaltest"
)

func TestConformance(t *testing.T) {
	journaltest.Run(t, journaltest.Config{
		Open: func(*testing.T) journal.Store { return New(nil) },
		Damage: func(t *testing.T, st journal.Store, rec *journal.Record) journal.Store {
			s := st.(*Store)
			s.mu.Lock()
			defer s.mu.Unlock()
			stored := s.recs[journal.RefOf(rec).Seq]
			if stored == nil || len(stored.Body) == 0 {
				t.Fatalf("Damage: no body stored for %s", journal.NameOf(rec))
			}
			stored.Body[0] ^= 0xff
			return s
		},
	})
}
