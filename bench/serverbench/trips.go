// This file counts the child's round trips to Redis and PostgreSQL, for the
// trips/req column: a go-redis hook counts each command or pipeline sent, a
// pgx tracer each statement (BEGIN and COMMIT included) or batch. Pings of
// connections that sat idle are counted too; preparing a statement is not.

package serverbench

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// storeTrips is the child's round trips to its stores so far.
var storeTrips atomic.Uint64

// tripHook is a redis.Hook that counts round trips.
type tripHook struct{}

func (tripHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		storeTrips.Add(1)
		return next(ctx, cmd)
	}
}

func (tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		storeTrips.Add(1)
		return next(ctx, cmds)
	}
}

// tripTracer is a pgx tracer that counts round trips.
type tripTracer struct{}

func (tripTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	storeTrips.Add(1)
	return ctx
}

func (tripTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (tripTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	storeTrips.Add(1)
	return ctx
}

func (tripTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (tripTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
