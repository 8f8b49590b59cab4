// This file holds the group lease of operation IDs: the leases taken by
// operation ID at one moment (Claim, TryClaim, and Get or Reload of a name
// claimed without its row) share one UPDATE … WHERE operation_id =
// ANY($2), one round trip, each row on the same conditions as a lease
// taken alone (lease.go).

package pgjournal

import (
	"context"
	"sync"
)

// pendingTake is one lease by operation ID waiting for the next batch.
type pendingTake struct {
	opID string
	done chan takeResult
}

// takeResult is what the statement said of one operation ID: the lease
// taken (seq and epoch set), the row leased by another live instance
// (exists only), or no row.
type takeResult struct {
	seq, epoch *int64
	exists     bool
	err        error
}

// takes is the queue of leases by operation ID and whether a batch is
// being written.
type takes struct {
	mu      sync.Mutex
	queue   []*pendingTake
	writing bool
}

// takeBatch bounds the operation IDs of one UPDATE.
const takeBatch = 512

// takeByID takes the lease on operation opID's row in the next batch, as
// takeLease's statement does for one name. The batch runs under its own
// deadline (Lease); a caller whose ctx ends stops waiting, and a lease
// taken meanwhile runs out, as after a crash.
func (j *Journal) takeByID(ctx context.Context, opID string) takeResult {
	p := &pendingTake{opID: opID, done: make(chan takeResult, 1)}
	t := &j.takes
	t.mu.Lock()
	t.queue = append(t.queue, p)
	lead := !t.writing
	t.writing = true
	t.mu.Unlock()
	if lead {
		go j.writeTakes()
	}
	select {
	case r := <-p.done:
		return r
	case <-ctx.Done():
		return takeResult{err: ctx.Err()}
	}
}

// writeTakes writes the queue a batch at a time until it is empty. An ID
// queued twice waits for the next batch.
func (j *Journal) writeTakes() {
	t := &j.takes
	for {
		t.mu.Lock()
		if len(t.queue) == 0 {
			t.writing = false
			t.mu.Unlock()
			return
		}
		seen := make(map[string]bool, min(len(t.queue), takeBatch))
		var batch, rest []*pendingTake
		for _, p := range t.queue {
			if len(batch) < takeBatch && !seen[p.opID] {
				seen[p.opID] = true
				batch = append(batch, p)
			} else {
				rest = append(rest, p)
			}
		}
		t.queue = rest
		t.mu.Unlock()
		j.takeBatch(batch)
	}
}

// takeBatch takes the leases of batch in one statement: the UPDATE takes
// each lease it may; the outer SELECT, which sees the rows as they were,
// tells "no row" from "another's".
func (j *Journal) takeBatch(batch []*pendingTake) {
	ids := make([]string, len(batch))
	for i, p := range batch {
		ids[i] = p.opID
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
		j.opts.Namespace, ids, j.holder, j.opts.Lease)
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
	for _, p := range batch {
		if err != nil {
			p.done <- takeResult{err: err}
			continue
		}
		p.done <- res[p.opID] // none: no row
	}
}
