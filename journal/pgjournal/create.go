// This file holds the group commit of write-aheads: the Creates waiting at
// one moment go to PostgreSQL as one multi-row INSERT, one transaction and
// one WAL flush, as the bbolt journal shares one commit among them.

package pgjournal

import (
	"context"
	"sync"
	"time"

	"github.com/idem-go/idem/journal"
)

// pendingCreate is one Create waiting for the next batch.
type pendingCreate struct {
	rec  *journal.Record
	data []byte     // the record column, encoded
	done chan error // receives the outcome once
}

// creates is the queue of Creates and whether a batch is being written.
type creates struct {
	mu      sync.Mutex
	queue   []*pendingCreate
	writing bool
}

// createBatch bounds the rows of one INSERT.
const createBatch = 512

// create queues rec and waits for the batch that writes it. The batch runs
// under its own deadline (Lease), not the caller's context: once queued, a
// write-ahead is either committed or refused, never left in doubt by one
// caller giving up.
func (j *Journal) create(rec *journal.Record, data []byte) error {
	p := &pendingCreate{rec: rec, data: data, done: make(chan error, 1)}
	c := &j.creates
	c.mu.Lock()
	c.queue = append(c.queue, p)
	lead := !c.writing
	c.writing = true
	c.mu.Unlock()
	if lead {
		go j.writeCreates()
	}
	return <-p.done
}

// writeCreates writes the queue a batch at a time until it is empty.
func (j *Journal) writeCreates() {
	c := &j.creates
	for {
		c.mu.Lock()
		n := min(len(c.queue), createBatch)
		if n == 0 {
			c.writing = false
			c.mu.Unlock()
			return
		}
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		c.mu.Unlock()
		j.insert(batch)
	}
}

// insert writes batch in one statement and tells each Create its outcome:
// its Ref and lease, journal.ErrDuplicate for a row a unique index refused,
// or the statement's error.
func (j *Journal) insert(batch []*pendingCreate) {
	n := len(batch)
	var (
		keys    = make([]string, n)
		caller  = make([]bool, n)
		opIDs   = make([]*string, n)
		states  = make([]int16, n)
		records = make([]string, n)
		bodies  = make([][]byte, n)
		updated = make([]time.Time, n)
	)
	for i, p := range batch {
		r := p.rec
		keys[i], caller[i], states[i], records[i], bodies[i], updated[i] =
			r.Key, r.CallerKey, int16(r.State), string(p.data), bodyOf(r), r.Updated
		if r.OperationID != "" {
			opIDs[i] = &r.OperationID
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	rows, err := j.pool.Query(ctx, j.sql(`INSERT INTO {s}.operations
			(namespace, key, caller_key, operation_id, state, record, body, updated, holder, leased_until)
		SELECT $1, k, ck, op, st, rec::jsonb, b, up, $2, now() + $3::interval
		FROM unnest($4::text[], $5::boolean[], $6::text[], $7::smallint[], $8::text[], $9::bytea[], $10::timestamptz[])
			WITH ORDINALITY AS t(k, ck, op, st, rec, b, up, i)
		ORDER BY i
		ON CONFLICT DO NOTHING
		RETURNING seq, epoch, key, coalesce(operation_id, '')`),
		j.opts.Namespace, j.holder, j.opts.Lease, keys, caller, opIDs, states, records, bodies, updated)
	written := make(map[[2]string]lease, n)
	if err == nil {
		for rows.Next() {
			var r lease
			var key, opID string
			if err = rows.Scan(&r.seq, &r.epoch, &key, &opID); err != nil {
				break
			}
			written[[2]string{key, opID}] = r
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err == nil {
		j.stats.commits.Add(1)
		j.stats.writeAheads.Add(uint64(len(written)))
	}
	for _, p := range batch {
		if err != nil {
			p.done <- j.fail("create", err)
			continue
		}
		r, ok := written[[2]string{p.rec.Key, p.rec.OperationID}]
		if !ok {
			p.done <- journal.ErrDuplicate
			continue
		}
		journal.SetRef(p.rec, journal.Ref{Seq: uint64(r.seq), Part: int(r.epoch)})
		j.noteLease(journal.NameOf(p.rec), r)
		p.done <- nil
	}
}
