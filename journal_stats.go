// This file holds the cheap summaries of a Journal that the Transport needs
// apart from its records: how many operations are pending (for the
// Observer's gauge). It uses only the journal's read path (journal.go), so a
// faster storage layout can answer them without touching callers.

package idem

// pendingCount returns the number of pending operations in the journal,
// after committing deferred state changes.
func (j *Journal) pendingCount() (int, error) {
	recs, err := j.pending()
	return len(recs), err
}
