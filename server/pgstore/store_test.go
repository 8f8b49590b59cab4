// store_test.go checks what the conformance suite does not: Open's options, the migration
// (idempotent, concurrent, a newer schema refused), header bytes kept exactly, and that
// leases are on the database's clock.

package pgstore_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

func TestOpenChecksOptions(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	for name, o := range map[string]pgstore.Options{
		"quoted schema":   {Schema: `a"b`},
		"digit first":     {Schema: "1abc"},
		"too long":        {Schema: "s234567890123456789012345678901234567890123456789012345678901234"},
		"negative TTL":    {TTL: -time.Second},
		"negative batch":  {PruneBatch: -1},
		"space in schema": {Schema: "a b"},
	} {
		_, err := pgstore.Open(ctx, pool, &o)
		assert.ErrorIs(t, err, pgstore.ErrInvalidOptions, name)
	}
	_, err := pgstore.Open(ctx, nil, nil)
	assert.ErrorIs(t, err, pgstore.ErrInvalidOptions, "nil pool")
	var noCtx context.Context // a caller's nil context is refused, not dereferenced
	_, err = pgstore.Open(noCtx, pool, nil)
	assert.ErrorIs(t, err, pgstore.ErrInvalidOptions, "nil context")
}

// A Store pointed at a closed port is refused at start-up, not found out by every
// request answering 503; Ping answers for a live one.
func TestOpenNeedsTheDatabase(t *testing.T) {
	ctx := context.Background()
	closed, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	defer closed.Close()
	s, err := pgstore.Open(ctx, closed, nil)
	require.Error(t, err)
	require.Nil(t, s)

	pool := testPool(t)
	live := openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
	require.NoError(t, live.Ping(ctx))
}

// Many instances migrating one fresh schema at once take turns: one creates the table, the
// others find it; a second Migrate later changes nothing.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	pool := testPool(t)
	opts := &pgstore.Options{Schema: testSchema(t, pool)}
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() { errs <- pgstore.Migrate(context.Background(), pool, opts) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, pgstore.Migrate(context.Background(), pool, opts))
	var versions int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM `+pgx.Identifier{opts.Schema}.Sanitize()+`.server_version`).Scan(&versions))
	assert.Equal(t, 1, versions, "the version was recorded more than once")
}

// A schema written by a newer pgstore is refused rather than misread.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	pool := testPool(t)
	opts := pgstore.Options{Schema: testSchema(t, pool)}
	openStore(t, pool, opts)
	_, err := pool.Exec(context.Background(), `INSERT INTO `+pgx.Identifier{opts.Schema}.Sanitize()+`.server_version VALUES ($1)`,
		pgstore.SchemaVersion+1)
	require.NoError(t, err)
	_, err = pgstore.Open(context.Background(), pool, &opts)
	assert.ErrorIs(t, err, pgstore.ErrNewerSchema)
}

// Header values that are not UTF-8 (obs-text) and an empty body come back exactly.
func TestHeaderBytesKept(t *testing.T) {
	pool := testPool(t)
	s := openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: "k"}
	cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	require.NoError(t, err)
	require.True(t, cl.Claimed)
	want := http.Header{"X-Latin1": {"caf\xe9", "na\xefve"}, "X-Nul-Free": {"a\tb"}}
	require.NoError(t, s.Complete(ctx, sc, cl.Token, &server.Response{Status: 204, Header: want.Clone()}, time.Hour))
	cl, err = s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, cl.Record.Response)
	assert.Equal(t, want, cl.Record.Response.Header)
	assert.Empty(t, cl.Record.Response.Body)
	assert.Equal(t, 204, cl.Record.Response.Status)
}

// The row's lease_until is the database's now() plus the lease, in the right unit (the
// Store sends durations as microseconds and reads no client clock).
func TestLeaseOnDatabaseClock(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	s := openStore(t, pool, pgstore.Options{Schema: schema})
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: "k"}
	_, err := s.Claim(ctx, sc, server.NewToken(), "fp", 90*time.Second, time.Hour)
	require.NoError(t, err)
	var skew time.Duration
	require.NoError(t, pool.QueryRow(ctx, `SELECT (extract(epoch FROM lease_until - clock_timestamp() - interval '90 seconds') * 1e6)::bigint * interval '1 microsecond'
		FROM `+pgx.Identifier{schema}.Sanitize()+`.server_records WHERE scope = $1`, sc.ID()).Scan(&skew))
	assert.InDelta(t, 0, skew.Seconds(), 1, "lease_until is not the database's now() + 90 s")
}
