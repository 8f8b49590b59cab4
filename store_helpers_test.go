package idem

import (
	"context"

	"github.com/idem-go/idem/journal"
)

// These helpers call a journal through the journal.Store contract, as the
// Transport does, under the short names the tests used for the boltjournal.Journal's
// own methods before it moved to journal/boltjournal.

// insertRec writes rec ahead (Store.Create), its key the caller's if callerKey.
func insertRec(s journal.Store, rec *Record, callerKey bool) error {
	rec.CallerKey = callerKey
	return s.Create(context.Background(), rec)
}

// saveRec defers writing rec's new state (Store.Update, Deferred).
func saveRec(s journal.Store, rec *Record) error {
	return s.Update(context.Background(), rec, journal.Deferred)
}

// flushStore commits every deferred state change (Store.Flush).
func flushStore(s journal.Store) error { return s.Flush(context.Background()) }

// pendingAfter lists at most n pending records past seq after (Store.Pending).
func pendingAfter(s journal.Store, after uint64, n int) ([]*Record, error) {
	var recs []*Record
	for rec, err := range s.Pending(context.Background(), after) {
		if err != nil {
			return nil, err
		}
		if len(recs) == n {
			break
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// pendingCount counts the pending operations (Store.PendingCount).
func pendingCount(s journal.Store) (int, error) { return s.PendingCount(context.Background()) }

// pendingRecord is a minimal pending record with key.
func pendingRecord(key string) *Record {
	return &Record{Key: key, Method: "POST", URL: "http://127.0.0.1/payments", State: StatePending}
}
