// This file holds pruning: finished records deleted once Retention has
// passed (read.go holds the reads, commit.go the periodic prune's trigger).

package boltjournal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
)

// Prune deletes settled, failed and expired records last updated more than
// retention ago, with their index entries, and returns how many it deleted.
// Pending records are never pruned. Once pruned, an operation ID is free to
// name a new operation.
func (j *Journal) Prune(retention time.Duration) (int, error) {
	if err := j.flush(); err != nil {
		return 0, err
	}
	cutoff := j.now().Add(-retention)
	n := 0
	busy := j.unsavedIDs() // changed since: a call holds them, leave them
	err := j.update(func(tx *bolt.Tx) error {
		done, bodies, index := tx.Bucket(bucketDone), tx.Bucket(bucketBodies), tx.Bucket(bucketIndex)
		var doomed []*Record
		err := done.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("%w: %s: bad record key %x", journal.ErrCorrupt, j.path, k)
			}
			r, err := decodePlain(v) // what pruning needs is never sealed
			if err != nil {
				return fmt.Errorf("%w: %s: record %x: %w", journal.ErrCorrupt, j.path, k, err)
			}
			setSeq(r, binary.BigEndian.Uint64(k))
			if r.Updated.Before(cutoff) && !busy[seqOf(r)] {
				doomed = append(doomed, r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range doomed {
			for _, k := range indexKeys(r) {
				// The name may have moved on to a newer operation.
				if !bytes.Equal(index.Get(k), idKey(seqOf(r))) {
					continue
				}
				if err := index.Delete(k); err != nil {
					return err
				}
			}
			if err := done.Delete(idKey(seqOf(r))); err != nil {
				return err
			}
			if err := deleteBody(bodies, idKey(seqOf(r))); err != nil {
				return err
			}
		}
		n = len(doomed)
		return nil
	})
	return n, err
}
