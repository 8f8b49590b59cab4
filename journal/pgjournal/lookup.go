// This file holds the group look-up of operation IDs: the Gets by
// operation ID waiting at one moment read their rows in one SELECT …
// WHERE operation_id = ANY($2), one round trip, as the write-aheads of the
// moment share one INSERT (create.go).

package pgjournal

import (
	"context"
	"sync"

	"github.com/idem-go/idem/journal"
)

// pendingLookup is one Get by operation ID waiting for the next batch.
type pendingLookup struct {
	opID string
	done chan lookupResult
}

// lookupResult is what readOne would have returned for one look-up.
type lookupResult struct {
	rec *journal.Record
	err error
}

// lookups is the queue of look-ups and whether a batch is being read.
type lookups struct {
	mu      sync.Mutex
	queue   []*pendingLookup
	reading bool
}

// lookupBatch bounds the operation IDs of one SELECT.
const lookupBatch = 512

// lookup reads the row of operation opID, with its body, as readOne does,
// in the next batch. The batch runs under its own deadline (Lease); a
// caller whose ctx ends stops waiting for it.
func (j *Journal) lookup(ctx context.Context, opID string) (*journal.Record, error) {
	p := &pendingLookup{opID: opID, done: make(chan lookupResult, 1)}
	l := &j.lookups
	l.mu.Lock()
	l.queue = append(l.queue, p)
	lead := !l.reading
	l.reading = true
	l.mu.Unlock()
	if lead {
		go j.readLookups()
	}
	select {
	case r := <-p.done:
		return r.rec, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readLookups reads the queue a batch at a time until it is empty.
func (j *Journal) readLookups() {
	l := &j.lookups
	for {
		l.mu.Lock()
		n := min(len(l.queue), lookupBatch)
		if n == 0 {
			l.reading = false
			l.mu.Unlock()
			return
		}
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
		l.mu.Unlock()
		j.readBatch(batch)
	}
}

// readBatch reads the rows of batch in one statement. A row that does not
// read cleanly (a database error, a corrupt or sealed row) sends every
// look-up of the batch to a read of its own, which says which and why.
func (j *Journal) readBatch(batch []*pendingLookup) {
	ids := make([]string, len(batch))
	for i, p := range batch {
		ids[i] = p.opID
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	found, ok := j.readIDs(ctx, ids)
	given := make(map[string]bool, len(batch))
	for _, p := range batch {
		if ok && !given[p.opID] {
			// A Store never hands one record to two callers: a second
			// look-up of the same ID reads its own below.
			given[p.opID] = true
			rec, err := found[p.opID], error(nil)
			if rec != nil {
				err = j.checkBody(rec)
			}
			p.done <- lookupResult{rec, err}
			continue
		}
		rec, err := j.readOne(ctx, "get", j.pool.QueryRow(ctx, j.sql(`SELECT `+columns+`, body FROM {s}.operations
			WHERE namespace = $1 AND operation_id = $2`), j.opts.Namespace, p.opID))
		p.done <- lookupResult{rec, err}
	}
}

// readIDs reads the rows of ids; ok is false if any did not read cleanly.
func (j *Journal) readIDs(ctx context.Context, ids []string) (found map[string]*journal.Record, ok bool) {
	rows, err := j.pool.Query(ctx, j.sql(`SELECT `+columns+`, body FROM {s}.operations
		WHERE namespace = $1 AND operation_id = ANY($2)`), j.opts.Namespace, ids)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	found = make(map[string]*journal.Record, len(ids))
	for rows.Next() {
		rec, sealErr, err := scanRecord(rows, true, j.ring)
		if err != nil || sealErr != nil {
			return nil, false
		}
		found[rec.OperationID] = rec
	}
	return found, rows.Err() == nil
}
