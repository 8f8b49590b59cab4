// This file holds deferred updates: a settle that PostgreSQL commits
// without waiting for its WAL flush (synchronous_commit off for that
// transaction alone), made durable by Flush, by a flush scheduled a few
// milliseconds later, or at Close. Losing one in a crash of the database
// costs one harmless resend with the same key, as with bbolt.

package pgjournal

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// deferredFlushDelay bounds how long a deferred update may stay unflushed.
const deferredFlushDelay = 20 * time.Millisecond

// execDeferred runs one statement in a transaction that commits without
// waiting for the WAL flush, in one round trip, calls row with the first
// column of each row it returns, and schedules a flush.
func (j *Journal) execDeferred(ctx context.Context, row func(int64), sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL synchronous_commit = off`)
	// A plan for these values, never one cached from when the table was small: a
	// generic plan made then keeps scanning the whole table as it grows.
	b.Queue(`SET LOCAL plan_cache_mode = force_custom_plan`)
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		var v int64
		_, err := pgx.ForEachRow(rows, []any{&v}, func() error {
			row(v)
			return nil
		})
		return err
	})
	b.Queue(`COMMIT`)
	err := j.pool.SendBatch(ctx, b).Close()
	if err == nil {
		j.scheduleFlush()
	}
	return err
}

// scheduleFlush makes sure a flush runs within deferredFlushDelay.
func (j *Journal) scheduleFlush() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.unflushed = true
	j.deferredGen++
	if j.flushTimer == nil && !j.closed {
		j.flushTimer = time.AfterFunc(deferredFlushDelay, func() {
			ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
			defer cancel()
			j.flush(ctx) // a failure leaves unflushed set: the next Flush or Close tries again
		})
	}
}

// flush makes every deferred update committed before it durable: a
// transaction that takes a transaction ID commits synchronously, and
// PostgreSQL's WAL flush for it covers every earlier commit.
func (j *Journal) flush(ctx context.Context) error {
	j.mu.Lock()
	j.flushTimer = nil
	due := j.unflushed
	j.unflushed = false
	j.mu.Unlock()
	if !due {
		return nil
	}
	if _, err := j.pool.Exec(ctx, `SELECT txid_current()`); err != nil {
		j.mu.Lock()
		j.unflushed = true
		j.mu.Unlock()
		return j.fail("flush", err)
	}
	j.stats.commits.Add(1)
	return nil
}

// deferredCount returns how many deferred commits have returned so far,
// for flushedBy.
func (j *Journal) deferredCount() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.deferredGen
}

// flushedBy notes that a commit which waited for the WAL flush, and was
// sent after the first n deferred commits had returned, made them durable:
// PostgreSQL flushes the WAL in order, up to that commit's record. If none
// came since, the scheduled flush has nothing left to do.
func (j *Journal) flushedBy(n uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.deferredGen == n {
		j.unflushed = false
	}
}
