// This file holds the group commit of deferred settles: the deferred Updates
// to a final state waiting at one moment go to PostgreSQL as one multi-row
// UPDATE, in one transaction that commits without waiting for its WAL flush
// (deferred.go makes it durable soon after), in one round trip. Each row
// stays conditional on its own epoch and lease, as a lone Update is.

package pgjournal

import (
	"context"
	"time"
)

// pendingSettle is one deferred Update waiting for the next batch.
type pendingSettle struct {
	seq, epoch int64
	state      int16
	data       []byte    // the record column
	updated    time.Time // the updated column
	body       []byte    // the body column; nil keeps the stored one
	box        []byte    // the sealed column; nil keeps the stored one
	sealed     bool      // rec.Sealed: written only while pending
}

// settleResult tells a deferred Update whether its row changed.
type settleResult struct {
	changed bool
	err     error
}

// settleCall is a deferred Update in the group of settles.
type settleCall = call[pendingSettle, settleResult]

// settleBatch bounds the rows of one UPDATE.
const settleBatch = 512

// settleKey is the group key of settles: a row queued twice waits for the
// next batch, as one UPDATE changes a row once.
func settleKey(p *pendingSettle) int64 { return p.seq }

// settle queues p and waits for the batch that writes it. As with create,
// the Update that finds no batch under way writes the first itself, and
// the batch runs under its own deadline (Lease), not the caller's context.
func (j *Journal) settle(p pendingSettle) settleResult {
	r, _ := j.settles.do(context.Background(), p)
	return r
}

// updateBatch writes batch in one transaction that does not wait for the
// WAL flush, and tells each Update whether its row changed.
func (j *Journal) updateBatch(batch []*settleCall) {
	n := len(batch)
	var (
		seqs    = make([]int64, n)
		epochs  = make([]int64, n)
		states  = make([]int16, n)
		records = make([]string, n)
		updated = make([]time.Time, n)
		bodies  = make([][]byte, n)
		boxes   = make([][]byte, n)
		sealed  = make([]bool, n)
	)
	for i, c := range batch {
		p := &c.in
		seqs[i], epochs[i], states[i], records[i], updated[i], bodies[i], boxes[i], sealed[i] =
			p.seq, p.epoch, p.state, string(p.data), p.updated, p.body, p.box, p.sealed
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	changed := make(map[int64]bool, n)
	err := j.execDeferred(ctx, func(seq int64) { changed[seq] = true }, j.sql(`UPDATE {s}.operations o
		SET state = u.st, record = u.rec::jsonb, updated = u.up,
			body = CASE WHEN u.st = 2 THEN NULL ELSE coalesce(u.b, o.body) END,
			sealed = coalesce(u.box, o.sealed),
			leased_until = CASE WHEN u.st = 1 THEN o.leased_until END
		FROM unnest($2::bigint[], $3::bigint[], $4::smallint[], $5::text[], $6::timestamptz[], $7::bytea[], $8::bytea[], $9::boolean[])
			AS u(seq, ep, st, rec, up, b, box, ls)
		WHERE o.namespace = $1 AND o.seq = u.seq AND o.epoch = u.ep
			AND (o.holder = $10 OR o.leased_until IS NULL OR o.leased_until < now())
			AND (NOT u.ls OR o.state = 1)
		RETURNING o.seq`),
		j.opts.Namespace, seqs, epochs, states, records, updated, bodies, boxes, sealed, j.holder)
	for _, c := range batch {
		c.answer(settleResult{changed: changed[c.in.seq], err: err})
	}
}
