// pooltimeouts_test.go: a pool whose connections start with lock and statement timeouts no
// longer than the Store's (RuntimeParams) gets each statement alone, still bounded; any
// other pool gets the Store's timeouts set with each statement.

package pgstore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// setCounter counts the statements that set the Store's timeouts, alone or in a batch.
type setCounter struct{ sets atomic.Int64 }

func (c *setCounter) count(sql string) {
	if strings.Contains(sql, "set_config('lock_timeout'") {
		c.sets.Add(1)
	}
}

func (c *setCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.count(d.SQL)
	return ctx
}
func (c *setCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *setCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *setCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.count(d.SQL)
}
func (c *setCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// tracedPool connects with params added to the test server's URL, statements seen by tr.
func tracedPool(t testing.TB, params string, tr pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	return pgtest.Connect(t, pgtest.URL()+params, func(ctx context.Context, url string) (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.Tracer = tr
		return pgxpool.NewWithConfig(ctx, cfg)
	}, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
}

// heldClaim claims a key in s, completes it in a transaction left open (its row locked),
// and returns how long another claim of that key took to fail, and how many statements
// setting timeouts that claim sent.
func heldClaim(t *testing.T, pool *pgxpool.Pool, s *pgstore.Store, tr *setCounter) (time.Duration, int64) {
	t.Helper()
	ctx := context.Background()
	sc, tx := holdRow(t, pool, s)
	defer func() { _ = tx.Rollback(ctx) }()

	before := tr.sets.Load()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a bound for the test, not the Store
	defer cancel()
	start := time.Now()
	_, err := s.Claim(cctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	took := time.Since(start)
	require.Error(t, err, "a claim went through a held row")
	require.NoError(t, cctx.Err(), "the claim was ended by the test's context, not by a timeout")
	return took, tr.sets.Load() - before
}

// The pool's own timeouts (200 ms, under the Store's 2 s) bound a claim on a held row, and
// the claim sends no statement setting them.
func TestPoolTimeoutsBoundStatements(t *testing.T) {
	tr := &setCounter{}
	pool := tracedPool(t, "&lock_timeout=200&statement_timeout=200ms", tr)
	s := openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
	took, sets := heldClaim(t, pool, s, tr)
	assert.Less(t, took, 1500*time.Millisecond, "the claim waited past the pool's lock timeout")
	assert.Zero(t, sets, "the Store set timeouts the pool's connections carry already")
}

// Pools whose connections do not carry both timeouts within the Store's get the Store's
// timeouts with each statement: a claim on a held row fails within StatementTimeout.
func TestPoolTimeoutsOtherwiseSetPerStatement(t *testing.T) {
	for name, params := range map[string]string{
		"longer":       "&lock_timeout=10s&statement_timeout=10s",
		"lock missing": "&statement_timeout=100",
		"none":         "&lock_timeout=0&statement_timeout=0",
	} {
		t.Run(name, func(t *testing.T) {
			tr := &setCounter{}
			pool := tracedPool(t, params, tr)
			s := openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool), StatementTimeout: 200 * time.Millisecond})
			took, sets := heldClaim(t, pool, s, tr)
			assert.Less(t, took, 1500*time.Millisecond, "the claim waited past the Store's StatementTimeout")
			assert.Positive(t, sets, "the Store did not set its timeouts")
		})
	}
}
