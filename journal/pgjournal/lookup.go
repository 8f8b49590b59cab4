// This file holds the group look-up of operation IDs: the Gets by
// operation ID waiting at one moment read their rows in one SELECT …
// WHERE operation_id = ANY($2), one round trip, as the write-aheads of the
// moment share one INSERT (create.go).

package pgjournal

import (
	"context"

	"github.com/idem-go/idem/journal"
)

// lookupResult is what readOne would have returned for one look-up.
type lookupResult struct {
	rec *journal.Record
	err error
}

// lookupCall is a Get by operation ID, given by its ID, in the group of
// look-ups.
type lookupCall = call[string, lookupResult]

// lookupBatch bounds the operation IDs of one SELECT.
const lookupBatch = 512

// lookup reads the row of operation opID, with its body, as readOne does,
// in the next batch, which a goroutine reads. The batch runs under its own
// deadline (Lease); a caller whose ctx ends stops waiting for it. An ID
// looked up twice in one batch is answered twice (readBatch), so the group
// has no key.
func (j *Journal) lookup(ctx context.Context, opID string) (*journal.Record, error) {
	r, ok := j.lookups.do(ctx, opID)
	if !ok {
		return nil, ctx.Err()
	}
	return r.rec, r.err
}

// readBatch reads the rows of batch in one statement. A row that does not
// read cleanly (a database error, a corrupt or sealed row) sends every
// look-up of the batch to a read of its own, which says which and why.
func (j *Journal) readBatch(batch []*lookupCall) {
	ids := make([]string, len(batch))
	for i, c := range batch {
		ids[i] = c.in
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	found, ok := j.readIDs(ctx, ids)
	given := make(map[string]bool, len(batch))
	for _, c := range batch {
		id := c.in
		if ok && !given[id] {
			// A Store never hands one record to two callers: a second
			// look-up of the same ID reads its own below.
			given[id] = true
			rec, err := found[id], error(nil)
			if rec != nil {
				err = j.checkBody(rec)
			}
			c.answer(lookupResult{rec, err})
			continue
		}
		rec, err := j.readOne(ctx, "get", j.pool.QueryRow(ctx, j.sql(`SELECT `+columns+`, body FROM {s}.operations
			WHERE namespace = $1 AND operation_id = $2`), j.opts.Namespace, id))
		c.answer(lookupResult{rec, err})
	}
}

// readIDs reads the rows of ids; ok is false if any did not read cleanly.
func (j *Journal) readIDs(ctx context.Context, ids []string) (found map[string]*journal.Record, ok bool) {
	rows, err := j.pool.Query(ctx, j.sql(`SELECT `+columns+`, body FROM {s}.operations
		WHERE namespace = $1 AND operation_id = ANY($2)`), freshPlan, j.opts.Namespace, ids)
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
