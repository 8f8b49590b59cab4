// This file holds the cheap summaries of a Journal that the Transport needs
// apart from its records: how many operations are pending (for the
// Observer's gauge). It uses only the journal's read path (journal.go), so a
// faster storage layout can answer them without touching callers.

package boltjournal

import bolt "go.etcd.io/bbolt"

// pendingCount returns the number of pending operations in the journal,
// after committing deferred state changes.
func (j *Journal) pendingCount() (n int, err error) {
	if err := j.flush(); err != nil {
		return 0, err
	}
	err = j.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketPending).Stats().KeyN
		return nil
	})
	return n, err
}
