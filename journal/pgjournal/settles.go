// This file holds deferred settles: a Deferred Update to a final state is
// queued and Update returns at once. The queue rides the next write-ahead's
// transaction (create.go), whose commit waits for the WAL flush, or is
// written in a transaction of its own settleDelay later, by Flush, or at
// Close. Each row stays conditional on its own epoch and lease, as a lone
// Update is; a settle the condition refuses changes nothing and is counted
// (Stats.FencedSettles). A settle whose row another session holds does
// not hold up the write-aheads it rides (rideLockTimeout), nor the heartbeat's
// renewals (renew skips a held row). Losing the queue in a crash costs one
// harmless resend with the same key, as with bbolt (DESIGN: deferred
// settles).

package pgjournal

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// settleDelay bounds how long a queued settle waits for a write-ahead to
// ride before it is written on its own (Journal.settleDelay but in tests).
const settleDelay = 20 * time.Millisecond

// settleBatch bounds the rows of one settling UPDATE.
const settleBatch = 512

// pendingSettle is one deferred Update waiting in the queue.
type pendingSettle struct {
	name       journal.Name
	key        string // the record's key: Get by a caller's key finds an operation named by its ID
	seq, epoch int64
	state      int16
	data       []byte    // the record column
	updated    time.Time // the updated column
	body       []byte    // the body column; nil keeps the stored one
	box        []byte    // the sealed column; nil keeps the stored one
	sealed     bool      // rec.Sealed: written only while pending
	alone      bool      // a write-ahead's transaction failed with it: written on its own from then on
}

// settling is a batch of queued settles being written: done is closed
// once the transaction carrying them ended.
type settling struct {
	batch []*pendingSettle
	done  chan struct{}
}

// inFlight is an operation whose settle a batch is writing.
type inFlight struct {
	key  string        // the record's key
	done chan struct{} // the batch's
}

// queueSettle queues p, replacing an earlier settle of the same operation
// still queued, and makes sure the queue is written within settleDelay. It
// reports false, and queues nothing, once the Journal is closed: Close has
// written the queue, and nothing would write p.
func (j *Journal) queueSettle(p *pendingSettle) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return false
	}
	j.queued[p.name] = p
	j.armSettleTimer()
	return true
}

// armSettleTimer makes sure the queue, if not empty, is written within
// settleDelay. j.mu is held.
func (j *Journal) armSettleTimer() {
	if len(j.queued) > 0 && j.settleTimer == nil && !j.closed {
		j.settleTimer = time.AfterFunc(j.settleDelay, j.writeQueuedLater)
	}
}

// takeSettles takes at most max queued settles off the queue, in seq
// order (the order the heartbeat's renewal locks rows in), leaving those
// whose operation a batch is still writing: one transaction at a time
// writes an operation, in the order its settles came. For a write-ahead
// to carry (ride), it leaves those a write-ahead's transaction failed
// with too. It returns nil if there is none.
func (j *Journal) takeSettles(max int, ride bool) *settling {
	j.mu.Lock()
	defer j.mu.Unlock()
	var batch []*pendingSettle
	for name, p := range j.queued {
		if len(batch) == max {
			break
		}
		if _, busy := j.writing[name]; !busy && !(ride && p.alone) {
			batch = append(batch, p)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	slices.SortFunc(batch, func(a, b *pendingSettle) int { return cmp.Compare(a.seq, b.seq) })
	s := &settling{batch: batch, done: make(chan struct{})}
	for _, p := range batch {
		delete(j.queued, p.name)
		j.writing[p.name] = inFlight{key: p.key, done: s.done}
	}
	return s
}

// settled ends s: with err, its settles go back to the queue (unless a newer
// settle of the same operation came meanwhile) to be written later, on
// their own if rode; else each row changed or was refused, and either way
// this Journal's lease on it is over.
func (j *Journal) settled(s *settling, changed map[int64]bool, err error, rode bool) {
	j.mu.Lock()
	for _, p := range s.batch {
		delete(j.writing, p.name)
		switch {
		case err != nil:
			if _, newer := j.queued[p.name]; !newer {
				p.alone = p.alone || rode
				j.queued[p.name] = p
			}
		default:
			if j.leases != nil && j.leases[p.name].seq == p.seq {
				delete(j.leases, p.name) // the write gave it up, or another instance holds it
			}
			if !changed[p.seq] {
				j.stats.fencedSettles.Add(1)
			}
		}
	}
	j.armSettleTimer() // what failed, or came while s was written
	j.mu.Unlock()
	close(s.done)
}

// customPlan goes right before queueUpdate's UPDATE in its transaction, so
// that PostgreSQL plans that statement for its values each time. A plan it
// caches for the statement while the table is small scans the whole table,
// and keeps doing so as the table grows (50 ms per batch at 300,000 rows).
// Planning costs about 0.2 ms; a cached plan steered to the primary key
// (enable_seqscan off) was no faster in the bench, within its noise. A
// write-ahead INSERT the transaction carries goes before it and keeps its
// cached plan, which reads no table but namespaces by its key: planning
// it afresh too cost about 0.13 ms per transaction.
const customPlan = `SET LOCAL plan_cache_mode = force_custom_plan`

// rideLockTimeout goes before the settles' UPDATE in a write-ahead's
// transaction carrying them: a settle's row held by another session (a
// stuck statement, a long transaction) would otherwise hold up the
// write-ahead, and every later one it rides, until their deadline.
// PostgreSQL refuses the statement instead; the write-aheads are written
// again alone, and those settles on their own (settled: alone). (One
// SELECT of two set_config calls instead of the two SETs cost 0.2 ms more
// per transaction in pgbench.)
const rideLockTimeout = `SET LOCAL lock_timeout = '100ms'`

// queueUpdate adds to b, a transaction, customPlan and the UPDATE that
// writes s's settles, each row conditional on its epoch and lease, and
// notes in changed the rows it changed.
func (j *Journal) queueUpdate(b *pgx.Batch, s *settling, changed map[int64]bool) {
	b.Queue(customPlan)
	n := len(s.batch)
	var (
		seqs    = make([]int64, n)
		epochs  = make([]int64, n)
		records = make([]string, n)
		updated = make([]time.Time, n)
	)
	for i, p := range s.batch {
		seqs[i], epochs[i], records[i], updated[i] = p.seq, p.epoch, string(p.data), p.updated
	}
	if plainSettles(s.batch) {
		b.Queue(j.sql(settleUpdate), j.opts.Namespace, seqs, epochs, records, updated, j.holder).Query(noteChanged(changed))
		return
	}
	var (
		states = make([]int16, n)
		bodies = make([][]byte, n)
		boxes  = make([][]byte, n)
		sealed = make([]bool, n)
	)
	for i, p := range s.batch {
		states[i], bodies[i], boxes[i], sealed[i] = p.state, p.body, p.box, p.sealed
	}
	b.Queue(j.sql(finalUpdate), j.opts.Namespace, seqs, epochs, records, updated, j.holder, states, bodies, boxes, sealed).
		Query(noteChanged(changed))
}

// finalUpdate writes a batch of final states, each row conditional on its
// epoch and the lease ($1 the namespace; $2-$5 seqs, epochs, record columns
// and times; $6 this Journal; $7-$10 states, bodies, sealed columns, and
// whether each record is listed Sealed). A settled row's body goes; a
// failed or expired one keeps it unless given; a sealed column is kept
// unless given; a Sealed record changes only while pending.
const finalUpdate = `UPDATE {s}.operations o
	SET state = u.st, record = u.rec::jsonb, updated = u.up,
		body = CASE WHEN u.st = 2 THEN NULL ELSE coalesce(u.b, o.body) END,
		sealed = coalesce(u.box, o.sealed),
		leased_until = NULL
	FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[], $7::smallint[], $8::bytea[], $9::bytea[], $10::boolean[])
		AS u(seq, ep, rec, up, st, b, box, ls)
	WHERE o.namespace = $1 AND o.seq = u.seq AND o.epoch = u.ep
		AND (o.holder = $6 OR o.leased_until IS NULL OR o.leased_until < now())
		AND (NOT u.ls OR o.state = 1)
	RETURNING o.seq`

// settleUpdate is finalUpdate for a batch of plaintext operations settled,
// the usual batch (plainSettles): the same change to their rows with half
// the arrays and none of the CASEs, which cost about 55 µs more per ride
// transaction, planning and execution.
const settleUpdate = `UPDATE {s}.operations o
	SET state = 2, record = u.rec::jsonb, updated = u.up, body = NULL, leased_until = NULL
	FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[]) AS u(seq, ep, rec, up)
	WHERE o.namespace = $1 AND o.seq = u.seq AND o.epoch = u.ep
		AND (o.holder = $6 OR o.leased_until IS NULL OR o.leased_until < now())
	RETURNING o.seq`

// plainSettles reports whether every settle of batch settles a plaintext
// operation: what settleUpdate writes as finalUpdate would.
func plainSettles(batch []*pendingSettle) bool {
	for _, p := range batch {
		if p.state != int16(journal.StateSettled) || p.box != nil || p.sealed {
			return false
		}
	}
	return true
}

// noteChanged reads the seqs an UPDATE … RETURNING o.seq changed into changed.
func noteChanged(changed map[int64]bool) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		var seq int64
		_, err := pgx.ForEachRow(rows, []any{&seq}, func() error {
			changed[seq] = true
			return nil
		})
		return err
	}
}

// writeSettles writes s in a transaction of its own, which waits for the
// WAL flush, and ends it.
func (j *Journal) writeSettles(ctx context.Context, s *settling) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	changed := make(map[int64]bool, len(s.batch))
	j.queueUpdate(b, s, changed)
	b.Queue(`COMMIT`)
	err := j.pool.SendBatch(ctx, b).Close()
	if err == nil {
		j.stats.commits.Add(1)
	}
	j.settled(s, changed, err, false)
	if err != nil {
		return j.fail("settle", err)
	}
	return nil
}

// settling reports whether a settle of name is queued or being written.
func (j *Journal) settling(name journal.Name) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.settlingLocked(name)
}

// settlingLocked is settling with j.mu held.
func (j *Journal) settlingLocked(name journal.Name) bool {
	_, q := j.queued[name]
	_, w := j.writing[name]
	return q || w
}

// writeQueued writes every settle queued when it is called, and waits
// for those a batch is already writing: Flush, Close, and the reads that
// must see the newest state (All, PendingCount, Prune, LatestWritten).
func (j *Journal) writeQueued(ctx context.Context) error {
	return j.writeUntil(ctx, func() bool {
		return len(j.queued) == 0 && len(j.writing) == 0
	})
}

// writeQueuedFor is writeQueued for one operation: Get, Reload, Claim and a
// synchronous Update of name first write its queued settle, if any, so
// that they read its newest state, and write after it. A name without an
// operation ID is a key, which also names (for Get by a caller's key) an
// operation queued under its ID. It costs nothing when name has none.
func (j *Journal) writeQueuedFor(ctx context.Context, name journal.Name) error {
	return j.writeUntil(ctx, func() bool {
		if j.settlingLocked(name) {
			return false
		}
		if name.OperationID != "" {
			return true
		}
		for _, p := range j.queued {
			if p.key == name.Key {
				return false
			}
		}
		for _, w := range j.writing {
			if w.key == name.Key {
				return false
			}
		}
		return true
	})
}

// writeUntil writes the queue, a batch at a time, and waits for batches
// under way, until idle (called with j.mu held) holds or ctx ends.
func (j *Journal) writeUntil(ctx context.Context, idle func() bool) error {
	for {
		j.mu.Lock()
		if idle() {
			j.mu.Unlock()
			return nil
		}
		var wait chan struct{}
		for _, w := range j.writing {
			wait = w.done
			break
		}
		j.mu.Unlock()
		if s := j.takeSettles(settleBatch, false); s != nil {
			if err := j.writeSettles(ctx, s); err != nil {
				return err
			}
			continue
		}
		if wait == nil {
			continue // the queue was taken meanwhile: look again
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// writeQueuedLater is the timer that writes the queue settleDelay after a
// settle found it without one; a failure leaves the settles queued and
// sets the timer again.
func (j *Journal) writeQueuedLater() {
	j.mu.Lock()
	j.settleTimer = nil
	j.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	for s := j.takeSettles(settleBatch, false); s != nil; s = j.takeSettles(settleBatch, false) {
		if j.writeSettles(ctx, s) != nil {
			return
		}
	}
}

// rolledBack reports whether err is PostgreSQL's refusal of a statement:
// the transaction carrying it ended without a commit.
func rolledBack(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}
