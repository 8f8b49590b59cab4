// This file holds a group commit's transaction (commit.go holds the queue
// that gathers it): the deferred state changes, the settled records owed
// (history.go) and the write-aheads, in one fsynced bbolt transaction.

package boltjournal

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
)

// commitBatch writes the deferred state changes, the settled records owed
// to the done bucket (history.go) and the write-aheads in one transaction.
// With lazy, a settle that lazySettle allows only deletes the pending
// record, and its settled record comes back in left, owed. A write-ahead
// whose key or operation ID is taken fails alone; any other failure fails
// the whole batch.
func (j *Journal) commitBatch(batch []*write, settles, owed map[uint64]*deferredWrite, lazy bool) (left []owedWrite, _ error) {
	inserts := 0
	for _, w := range batch {
		if w.rec != nil {
			inserts++
		}
	}
	if inserts == 0 && len(settles) == 0 && len(owed) == 0 {
		return nil, nil // only flush markers, and nothing to flush
	}
	var newest time.Time // of the records written (written.go)
	for _, w := range batch {
		if w.rec != nil && w.rec.Written().After(newest) {
			newest = w.rec.Written()
		}
	}
	for _, d := range settles {
		if d.written.After(newest) {
			newest = d.written
		}
	}
	var stored int64 // the newest time written to the file by this commit
	err := j.update(func(tx *bolt.Tx) error {
		var err error
		if stored, err = j.raiseWritten(tx, newest); err != nil {
			return err
		}
		// Buckets are opened as needed: an open costs allocations.
		pending := appendBucket(tx, bucketPending)
		ids := make(idKeys, 0, 8*(len(owed)+len(settles)+len(batch)))
		var index *bolt.Bucket
		// In ID order: appends to the done bucket, and deletes in pending
		// that walk its pages in order, touch each page once.
		var buf [16]uint64
		for _, id := range sortedIDs(owed, buf[:0]) { // before the settles: one may change it
			if err := appendBucket(tx, bucketDone).Put(ids.key(id), owed[id].data); err != nil {
				return err
			}
		}
		left = left[:0] // a retry of the transaction starts again
		var cur *bolt.Cursor
		for _, id := range sortedIDs(settles, buf[:0]) {
			if cur == nil {
				cur = pending.Cursor()
			}
			d := settles[id]
			owe := lazy && lazySettle(d)
			moved, err := j.move(tx, cur, ids.key(id), d, !owe)
			if err != nil {
				return err
			}
			if owe && moved {
				left = append(left, owedWrite{id, d})
			}
		}
		for _, w := range batch {
			w.id, w.err = 0, nil
			switch {
			case w.rec == nil:
				continue
			case w.repend:
				w.err = j.rependTx(tx, w)
				continue
			}
			keys := w.keys
			if len(keys) > 0 && index == nil {
				index = tx.Bucket(bucketIndex)
			}
			if taken := takenKey(index, keys); taken != nil {
				w.err = fmt.Errorf("%w: %q is already in the journal", journal.ErrNameTaken, taken[2:])
				if w.staged != 0 {
					if err := dropStagedTx(tx, idKey(w.staged)); err != nil {
						return err
					}
				}
				continue
			}
			id := w.staged
			if id == 0 {
				var err error
				if id, err = pending.NextSequence(); err != nil {
					return err
				}
			} else if err := tx.Bucket(bucketMeta).Delete(stagedKey(idKey(id))); err != nil {
				return err
			}
			key := ids.key(id)
			for _, k := range keys {
				if err := index.Put(k, key); err != nil {
					return err
				}
			}
			bucket := pending // a test may insert a finished record
			if w.rec.State != StatePending {
				bucket = appendBucket(tx, bucketDone)
			}
			if err := bucket.Put(key, w.data); err != nil {
				return err
			}
			if len(w.body) > 0 {
				// bbolt copies the value into its page: the one copy made.
				if err := putBody(appendBucket(tx, bucketBodies), key, w.body); err != nil {
					return err
				}
			}
			w.id = id
		}
		return nil
	})
	if err != nil {
		for _, w := range batch {
			w.id, w.err = 0, err
		}
	}
	if err == nil {
		j.sawWritten(newest)
		j.noteFileWritten(stored)
	}
	return left, err
}

// appendBucket opens bucket name of tx for appends. Record IDs only grow:
// packing pages (bbolt splits them half full by default, for random
// inserts) halves the pages each commit writes.
func appendBucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	b := tx.Bucket(name)
	b.FillPercent = appendFill
	return b
}

// rependTx writes a pending record durably: in place if it is pending in
// the file, or moved back from the finished ones if it is failed there (a
// repend); else it was pruned or changed meanwhile (errRepend).
func (j *Journal) rependTx(tx *bolt.Tx, w *write) error {
	id := idKey(seqOf(w.rec))
	if pending := tx.Bucket(bucketPending); pending.Get(id) != nil {
		return pending.Put(id, keepBody(w.data, pending.Get(id)))
	}
	done := tx.Bucket(bucketDone)
	v := done.Get(id)
	if v == nil {
		return errRepend
	}
	if prev, err := decodePlain(v); err != nil || prev.State != StateFailed {
		return errRepend
	}
	data := keepBody(w.data, v) // before the delete frees v's page
	if err := done.Delete(id); err != nil {
		return err
	}
	return tx.Bucket(bucketPending).Put(id, data)
}

// sortedIDs appends the IDs of ws to ids, in increasing order. A commit
// runs it twice, with a buffer on its stack for the usual few.
func sortedIDs(ws map[uint64]*deferredWrite, ids []uint64) []uint64 {
	for id := range ws {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// idKeys hands out a commit's record keys (idKey) from one buffer: bbolt
// copies a key it stores, and reads a value only until the transaction
// ends, which the buffer outlives.
type idKeys []byte

func (b *idKeys) key(id uint64) []byte {
	n := len(*b)
	*b = binary.BigEndian.AppendUint64(*b, id)
	return (*b)[n:len(*b):len(*b)]
}

func takenKey(index *bolt.Bucket, keys [][]byte) []byte {
	for _, k := range keys {
		if index.Get(k) != nil {
			return k
		}
	}
	return nil
}
