// This file holds All (journal.Lister): every record of a journal in use,
// read in pages of short read transactions, so that a service's commits
// never wait for an inspection of its journal (Records, for the command,
// reads in one transaction that the commit loop runs).

package boltjournal

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
)

var _ journal.Lister = (*Journal)(nil)

// All yields every record without its body (journal.Lister): the pending
// ones as Pending lists them, then the settled, failed and expired ones,
// each group in creation order. The finished ones are read from the file a
// page at a time, with the state changes not yet committed (deferred
// settles, settled records still owed to the file: history.go) standing in
// for what the file holds. A record that settles between the two reads is
// listed twice, pending and settled; one pending throughout is listed once.
func (j *Journal) All(ctx context.Context) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		for rec, err := range j.Pending(ctx, 0) {
			if !yield(rec, err) || err != nil {
				return
			}
		}
		unsaved := j.finishedUnsaved()
		for after := uint64(0); ; {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			page, next, err := j.readFinished(after, pendingPage, unsaved)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, rec := range page {
				if !yield(rec, nil) {
					return
				}
			}
			if next == 0 {
				return
			}
			after = next
		}
	}
}

// finishedUnsaved returns the records whose newest state is finished but
// not yet committed to the done bucket, by ID, without their bodies: what
// unsaved would return for each, taken at once.
func (j *Journal) finishedUnsaved() map[uint64]*Record {
	c := &j.commit
	c.mu.Lock()
	ws := make(map[uint64]*deferredWrite)
	// Oldest first: a newer change to a record replaces an older one, in the
	// order unsaved looks them up.
	for _, m := range []map[uint64]*deferredWrite{c.history.writing, c.history.owed, c.flushing, c.deferred} {
		maps.Copy(ws, m)
	}
	c.mu.Unlock()
	recs := make(map[uint64]*Record)
	for id, d := range ws {
		if d.state == StatePending {
			continue
		}
		if rec := d.record(id); rec != nil {
			rec.Body = nil
			recs[id] = rec
		}
	}
	return recs
}

// readFinished reads at most n finished records with an ID above after, in
// ID order, from the done bucket, with those of unsaved in that range in
// place of (or besides) the file's, and returns them with the ID after
// which the next page starts (0: the listing is over).
func (j *Journal) readFinished(after uint64, n int, unsaved map[uint64]*Record) (page []*Record, next uint64, _ error) {
	err := j.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDone).Cursor()
		for k, v := c.Seek(idKey(after + 1)); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				return fmt.Errorf("%w: %s: bad record key %x", journal.ErrCorrupt, j.path, k)
			}
			id := binary.BigEndian.Uint64(k)
			if len(page) == n {
				next = id - 1
				return nil
			}
			if unsaved[id] != nil {
				continue // taken below, newer than the file's
			}
			rec, _, err := j.decode(tx, k, v, false) // a sealed record comes back Sealed
			if err != nil {
				return err
			}
			page = append(page, rec)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	upTo := next // the page's range: (after, next], or everything above after
	for id, rec := range unsaved {
		if id > after && (upTo == 0 || id <= upTo) {
			page = append(page, rec)
		}
	}
	slices.SortFunc(page, func(a, b *Record) int { return cmp.Compare(seqOf(a), seqOf(b)) })
	return page, next, nil
}
