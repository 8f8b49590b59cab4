// This file holds the journal's deferred state changes (commit.go holds the
// group commit they ride along with): a settle, give-up, failure or expiry
// is kept in memory, visible to reads at once, and written by the next
// commit, within flushDelay, or on Close.

package boltjournal

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
)

// deferredWrite is a state change waiting for a commit.
type deferredWrite struct {
	data    []byte // the metadata as stored: in buf when it fits
	state   State
	written time.Time // the record's Written
	named   bool      // it has an operation ID, or a caller's key
	// rec is the record as stored, for reads before the commit; nil for an
	// unsealed settled record (the usual settle), read back from data
	// instead (record).
	rec *Record
	buf [256]byte
}

// save defers writing a state change of an existing record. It returns at
// once; the change is durable after the next commit, at most flushDelay later
// (or on Close).
func (j *Journal) save(rec *Record) error {
	d := &deferredWrite{state: rec.State, written: rec.Written(), named: rec.OperationID != "" || rec.CallerKey}
	st := stored(rec)
	if rec.State != StateSettled || rec.EncryptionKeyID != "" {
		d.rec = deepCopy(st) // the caller may change rec once Update returned
		st = d.rec
	}
	var err error
	d.data, err = j.keyring.encodeMetaInto(st, d.buf[:]) // sealed again under the record's own key ID
	if err != nil {
		return err
	}
	id := seqOf(rec)
	j.changes.begin(id)
	defer j.changes.end(id) // after the unlock: the change is visible
	c := &j.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("%w: %s", journal.ErrClosed, j.path)
	}
	c.deferred[id] = d
	j.sawWritten(d.written) // reads see it from now on
	if !c.leading && c.timer == nil {
		j.armFlush()
	}
	return nil
}

// armFlush sets the flush timer for the deferred changes. c.mu must be held.
func (j *Journal) armFlush() {
	c := &j.commit
	c.timerGen++
	gen := c.timerGen
	c.timer = time.AfterFunc(flushDelay, func() { j.flushDeferred(gen) })
}

// record returns a copy of record id as d stores it, or nil if its
// metadata cannot be read back (then reads find the file's).
func (d *deferredWrite) record(id uint64) *Record {
	if d.rec != nil {
		return deepCopy(d.rec)
	}
	rec, err := decodePlain(d.data)
	if err != nil {
		return nil
	}
	setSeq(rec, id)
	return rec
}

// flushDeferred, the call of the flush timer armed as gen, commits deferred
// changes that no write-ahead took along. A timer that is no longer the
// current one fired as a commit stopped it (the changes it was for are
// taken): its call leaves the current timer alone.
func (j *Journal) flushDeferred(gen uint64) {
	c := &j.commit
	c.mu.Lock()
	if c.timer == nil || c.timerGen != gen {
		c.mu.Unlock()
		return
	}
	c.timer = nil
	if !c.closed && !c.leading && len(c.deferred) > 0 { // a running commit re-arms the timer if it leaves any
		j.kickLoop()
	}
	c.mu.Unlock()
}

// unsaved returns the newest deferred state of record id, if any.
func (j *Journal) unsaved(id uint64) *Record {
	c := &j.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.deferred[id]
	if d == nil {
		d = c.flushing[id]
	}
	if d == nil {
		d = c.history.get(id)
	}
	if d == nil {
		return nil
	}
	return d.record(id)
}

// deepCopy copies rec with its header, lists and body: records the Journal
// takes in or hands out share no memory with the caller's (journal.Store).
func deepCopy(rec *Record) *Record { return copyInto(new(Record), rec) }

// copyInto is deepCopy into dst, which it returns.
func copyInto(dst, rec *Record) *Record {
	*dst = *rec
	dst.Header = rec.Header.Clone()
	dst.Dropped, dst.DroppedQuery = slices.Clone(rec.Dropped), slices.Clone(rec.DroppedQuery)
	dst.Body = bytes.Clone(rec.Body)
	return dst
}

// closeCommits refuses new writes, waits for a running commit, and commits
// what is still deferred.
func (j *Journal) closeCommits() error {
	c := &j.commit
	c.mu.Lock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.history.stop()
	for c.leading {
		c.idle.Wait()
	}
	c.mu.Unlock()
	j.pruning.Wait() // its flush fails now that the journal is closed
	c.mu.Lock()
	j.stopLoop()
	c.leading = true // nobody else will lead again
	c.flushing, c.deferred = c.deferred, nil
	settles := c.flushing
	owed := c.history.take(true)
	c.mu.Unlock()
	if len(settles) == 0 && len(owed) == 0 {
		return nil
	}
	_, err := j.commitBatch(nil, settles, owed, false)
	c.mu.Lock()
	c.flushing = nil
	c.history.writing = nil // Close gives up what it failed to write
	c.mu.Unlock()
	return err
}

// unsavedWrites are the state changes not yet committed, by record ID: the
// newest of each.
func (j *Journal) unsavedWrites() map[uint64]*deferredWrite {
	c := &j.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.deferred)+len(c.flushing) == 0 {
		return nil
	}
	ws := make(map[uint64]*deferredWrite, len(c.deferred)+len(c.flushing))
	for id, d := range c.flushing {
		ws[id] = d
	}
	for id, d := range c.deferred { // newer than what is being flushed
		ws[id] = d
	}
	return ws
}

// unsavedIDs are the records with a state change not yet committed.
func (j *Journal) unsavedIDs() map[uint64]bool {
	c := &j.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make(map[uint64]bool, len(c.deferred)+len(c.flushing))
	for id := range c.deferred {
		ids[id] = true
	}
	for id := range c.flushing {
		ids[id] = true
	}
	return ids
}

// move writes a record's new state into the bucket that state belongs in:
// pending, or done (settled, failed, expired), unless toDone is false (the
// record then leaves pending without entering done: history.go). A settled
// operation's body is deleted; a failed or expired one keeps it, for
// reconciling or resending. moved reports that the record left pending. cur
// is a cursor of the pending bucket (opened for appends), which move
// repositions: one cursor serves a whole commit.
func (j *Journal) move(tx *bolt.Tx, cur *bolt.Cursor, id []byte, d *deferredWrite, toDone bool) (moved bool, _ error) {
	pending := cur.Bucket()
	// One search finds the record and, for a settle, deletes it there.
	k, v := cur.Seek(id)
	if !bytes.Equal(k, id) {
		// Finished already (repend makes a failed record pending again,
		// durably, before it is re-sent), or pruned: never resurrect it, nor
		// write a record without its body and index entries.
		done := appendBucket(tx, bucketDone)
		old := done.Get(id)
		if d.state == StatePending || old == nil {
			return false, nil
		}
		if d.state == StateSettled { // e.g. a failed one resolved: no body kept
			if !hasInlineBody(old) {
				if err := deleteBody(tx.Bucket(bucketBodies), id); err != nil {
					return false, err
				}
			}
			return false, done.Put(id, d.data)
		}
		return false, done.Put(id, keepBody(d.data, old)) // e.g. expired after a give-up
	}
	if d.state == StatePending {
		return false, pending.Put(id, keepBody(d.data, v))
	}
	// A failed or expired record keeps its body, for reconciling or
	// resending; a settled one drops it.
	data, inline := d.data, hasInlineBody(v)
	if d.state != StateSettled {
		data = keepBody(d.data, v) // before the delete frees v's page
	}
	if err := cur.Delete(); err != nil {
		return false, err
	}
	if d.state == StateSettled && !inline {
		if err := deleteBody(tx.Bucket(bucketBodies), id); err != nil {
			return false, err
		}
	}
	if !toDone {
		return true, nil
	}
	return true, appendBucket(tx, bucketDone).Put(id, data)
}
