// This file holds the group lease of operation IDs: the leases taken by
// operation ID at one moment (Claim, TryClaim, and Get or Reload of a name
// claimed without its row) share one UPDATE … WHERE operation_id =
// ANY($2), one round trip, each row on the same conditions as a lease
// taken alone (lease.go).

package pgjournal

import (
	"context"
)

// takeResult is what the statement said of one operation ID: the lease
// taken (seq and epoch set), the row leased by another live instance
// (exists only), or no row.
type takeResult struct {
	seq, epoch *int64
	exists     bool
	err        error
}

// takeCall is a lease by operation ID, given by its ID, in the group of
// leases.
type takeCall = call[string, takeResult]

// takeBatch bounds the operation IDs of one UPDATE.
const takeBatch = 512

// takeKey is the group key of leases: an ID queued twice waits for the
// next batch, as one UPDATE changes a row once.
func takeKey(opID *string) string { return *opID }

// takeByID takes the lease on operation opID's row in the next batch, which
// a goroutine writes, as takeLease's statement does for one name. The
// batch runs under its own deadline (Lease); a caller whose ctx ends stops
// waiting, and a lease taken meanwhile runs out, as after a crash.
func (j *Journal) takeByID(ctx context.Context, opID string) takeResult {
	r, ok := j.takes.do(ctx, opID)
	if !ok {
		return takeResult{err: ctx.Err()}
	}
	return r
}

// takeBatch takes the leases of batch in one statement: the UPDATE takes
// each lease it may; the outer SELECT, which sees the rows as they were,
// tells "no row" from "another's".
func (j *Journal) takeBatch(batch []*takeCall) {
	ids := make([]string, len(batch))
	for i, c := range batch {
		ids[i] = c.in
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	res := make(map[string]takeResult, len(batch))
	rows, err := j.pool.Query(ctx, j.sql(`WITH took AS (UPDATE {s}.operations
			SET epoch = CASE WHEN holder = $3 AND leased_until >= now() THEN epoch ELSE epoch + 1 END,
				holder = $3, leased_until = now() + $4::interval
			WHERE namespace = $1 AND operation_id = ANY($2)
				AND (leased_until IS NULL OR leased_until < now() OR holder = $3)
			RETURNING operation_id, seq, epoch)
		SELECT o.operation_id, t.seq, t.epoch FROM {s}.operations o LEFT JOIN took t ON t.operation_id = o.operation_id
		WHERE o.namespace = $1 AND o.operation_id = ANY($2)`),
		freshPlan, j.opts.Namespace, ids, j.holder, j.opts.Lease)
	if err == nil {
		for rows.Next() {
			var id string
			r := takeResult{exists: true}
			if err = rows.Scan(&id, &r.seq, &r.epoch); err != nil {
				break
			}
			res[id] = r
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, c := range batch {
		if err != nil {
			c.answer(takeResult{err: err})
			continue
		}
		c.answer(res[c.in]) // none: no row
	}
}
