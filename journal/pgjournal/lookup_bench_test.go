// A benchmark of what a Transport asks of the journal for new operations
// with operation IDs, with the round trips it makes per operation.

package pgjournal

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// roundTrips counts a pool's round trips: a statement, or a batch.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// BenchmarkOperationIDCall runs, from 16 goroutines per CPU over a pool of
// 16 connections, what a Transport asks of the journal for a new operation
// with an operation ID: Claim, Get (none yet), Create, a deferred settle,
// Release; it reports round trips per operation.
func BenchmarkOperationIDCall(b *testing.B) {
	count := &roundTrips{}
	open := func(ctx context.Context, url string) (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns, cfg.ConnConfig.Tracer = 16, count
		return pgxpool.NewWithConfig(ctx, cfg)
	}
	pool := pgtest.Connect(b, pgtest.URL(), open, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
	j := openTest(b, pool, Options{Schema: testSchema(b, pool), Namespace: namespace(b)})
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	before := count.n.Load()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("op-%d", n.Add(1))
			body := []byte(`{"amount":100}`)
			rec := &journal.Record{Key: "key-" + id, OperationID: id, Method: "POST",
				URL: "http://127.0.0.1:1/payments", Body: body, BodySHA256: journal.BodySum(body)}
			name := journal.NameOf(rec)
			if err := j.Claim(bg, name); err != nil {
				b.Error(err)
				return
			}
			if got, err := j.Get(bg, name); err != nil || got != nil {
				b.Errorf("Get: %v, %v", got, err)
			}
			journal.Apply(rec, journal.EventCreate, journal.Change{Now: time.Now()})
			if err := j.Create(bg, rec); err != nil {
				b.Error(err)
			}
			journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201})
			if err := j.Update(bg, rec, journal.Deferred); err != nil {
				b.Error(err)
			}
			j.Release(name)
		}
	})
	b.ReportMetric(float64(count.n.Load()-before)/float64(b.N), "roundtrips/op")
}
