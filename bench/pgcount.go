// This file counts what a PostgreSQL row asks of the server, on the client
// side of its own pool (a pgx tracer), since other clients of the same
// server make its own statistics useless for one row: statements,
// transactions (autocommit statements, batches, explicit COMMITs) and round
// trips (a statement or a batch).

package main

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// pgCounts are a pool's counters: see pgCounter.
type pgCounts struct {
	statements, xacts, roundTrips uint64
}

// since returns the counts from b to c.
func (c pgCounts) since(b pgCounts) pgCounts {
	return pgCounts{c.statements - b.statements, c.xacts - b.xacts, c.roundTrips - b.roundTrips}
}

// pgCounter is a pgx.QueryTracer and pgx.BatchTracer that counts
// statements (each one of a batch too, BEGIN and COMMIT included), round
// trips (a statement on its own, or a whole batch) and transactions ended
// by a commit: a statement or batch that leaves the connection idle (not
// in a transaction), but for ROLLBACK. A read-only transaction counts, as
// pg_stat_database's xact_commit counts it. It is safe for concurrent use.
type pgCounter struct {
	statements, xacts, roundTrips atomic.Uint64
}

var (
	_ pgx.QueryTracer = (*pgCounter)(nil)
	_ pgx.BatchTracer = (*pgCounter)(nil)
)

func (c *pgCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.statements.Add(1)
	c.roundTrips.Add(1)
	return ctx
}

func (c *pgCounter) TraceQueryEnd(_ context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err == nil && conn.PgConn().TxStatus() == 'I' && !strings.EqualFold(data.CommandTag.String(), "ROLLBACK") {
		c.xacts.Add(1)
	}
}

func (c *pgCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}

func (c *pgCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.statements.Add(1)
}

func (c *pgCounter) TraceBatchEnd(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	if data.Err == nil && conn.PgConn().TxStatus() == 'I' {
		c.xacts.Add(1)
	}
}

// counts returns the counters so far.
func (c *pgCounter) counts() pgCounts {
	return pgCounts{c.statements.Load(), c.xacts.Load(), c.roundTrips.Load()}
}
