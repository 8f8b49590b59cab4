// onecommit_bench_test.go measures the one-commit path beside the two-commit path
// (CompleteTx) and the middleware's own completion, with the same payments handler on the
// same database, a fresh key per request, requests in parallel: ns/op, and the round trips
// and writing commits per request that a pgx tracer counts on the pool.

package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// counter is a pgx tracer counting round trips (a statement or a batch) and the commits
// that wrote: an explicit COMMIT, or a statement outside a transaction that changed rows.
type counter struct {
	roundTrips, commits atomic.Int64
	inTx                sync.Map // *pgx.Conn -> bool
}

type stmtKey struct{}

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.roundTrips.Add(1)
	return context.WithValue(ctx, stmtKey{}, d.SQL)
}

func (c *counter) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	sql, _ := ctx.Value(stmtKey{}).(string)
	c.statement(conn, sql, d.CommandTag.RowsAffected(), d.Err)
}

func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}

func (c *counter) TraceBatchQuery(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.statement(conn, d.SQL, d.CommandTag.RowsAffected(), d.Err)
}

func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *counter) statement(conn *pgx.Conn, sql string, rows int64, err error) {
	switch s := strings.ToLower(strings.TrimSpace(sql)); {
	case err != nil:
	case s == "begin" || strings.HasPrefix(s, "begin "):
		c.inTx.Store(conn, true)
	case s == "commit":
		c.inTx.Delete(conn)
		c.commits.Add(1)
	case s == "rollback":
		c.inTx.Delete(conn)
	default:
		if _, tx := c.inTx.Load(conn); !tx && rows > 0 &&
			(strings.Contains(s, "insert") || strings.Contains(s, "update") || strings.Contains(s, "delete")) {
			c.commits.Add(1)
		}
	}
}

// plainPayer inserts its payment on the pool (its own commit) and answers; the middleware
// completes the record: three commits.
type plainPayer struct {
	pool   *pgxpool.Pool
	schema string
}

func (p *plainPayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var id int64
	if err := p.pool.QueryRow(r.Context(), `INSERT INTO `+pgx.Identifier{p.schema}.Sanitize()+`.payments (ref, amount) VALUES ($1, 1250) RETURNING id`,
		r.Header.Get("Ref")).Scan(&id); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	write(w, paymentResponse(id, payment{Ref: r.Header.Get("Ref"), Amount: 1250}))
}

// BenchmarkPaymentCommits serves POST /payments, a fresh key and reference per request,
// from GOMAXPROCS goroutines (-cpu 1,16), through the middleware in process on one of
// three paths: one-commit (OneCommit), two-commit (the handler's transaction with
// CompleteTx), three-commit (the handler's own insert, the middleware's Complete).
func BenchmarkPaymentCommits(b *testing.B) {
	for _, path := range []string{"one-commit", "two-commit", "three-commit"} {
		b.Run(path, func(b *testing.B) {
			tr := &counter{}
			pool := tracedPool(b, "&pool_max_conns=20", tr)
			schema := testSchema(b, pool)
			st := openStore(b, pool, pgstore.Options{Schema: schema, PruneEvery: -1})
			payments(b, pool, schema)
			var h http.Handler
			var store server.Store = st
			switch path {
			case "one-commit":
				oc := st.OneCommit()
				store, h = oc, oc.Wrap(&txPayer{schema: schema})
			case "two-commit":
				h = &payer{pool: pool, store: st, schema: schema}
			default:
				h = &plainPayer{pool: pool, schema: schema}
			}
			mw, err := server.New(&server.Options{Store: store})
			if err != nil {
				b.Fatal(err)
			}
			h = mw.Wrap(h)
			var n atomic.Int64
			tr.roundTrips.Store(0)
			tr.commits.Store(0)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					ref := fmt.Sprintf("b-%d", i)
					r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"ref":"`+ref+`","amount":1250}`))
					r.Header.Set("Idempotency-Key", ref)
					r.Header.Set("Ref", ref)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusCreated {
						b.Errorf("%s: %d %s", ref, w.Code, w.Body)
						return
					}
				}
			})
			b.StopTimer()
			ops := float64(max(n.Load(), 1))
			b.ReportMetric(float64(tr.roundTrips.Load())/ops, "roundtrips/op")
			b.ReportMetric(float64(tr.commits.Load())/ops, "commits/op")
		})
	}
}
