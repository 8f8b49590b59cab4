// prune_test.go checks the deletion of expired rows: Prune in batches, live rows kept,
// and the background pruning until Close.

package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// rows counts the rows of schema's table.
func rows(t *testing.T, pool *pgxpool.Pool, schema string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+`.server_records`).Scan(&n))
	return n
}

// fill claims n scopes named prefix-i with a TTL of ttl, completing every other one.
func fill(t *testing.T, s *pgstore.Store, prefix string, n int, ttl time.Duration) {
	t.Helper()
	for i := range n {
		sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: fmt.Sprintf("%s-%d", prefix, i)}
		cl, err := s.Claim(context.Background(), sc, server.NewToken(), "fp", ttl, ttl)
		require.NoError(t, err)
		require.True(t, cl.Claimed)
		if i%2 == 0 {
			require.NoError(t, s.Complete(context.Background(), sc, cl.Token, &server.Response{Status: 201}, ttl))
		}
	}
}

// Prune deletes every expired row, in batches of PruneBatch, and no live one.
func TestPruneInBatches(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	s := openStore(t, pool, pgstore.Options{Schema: schema, PruneBatch: 2, PruneEvery: -1})
	fill(t, s, "old", 7, 50*time.Millisecond)
	fill(t, s, "live", 3, time.Hour)
	time.Sleep(60 * time.Millisecond)
	n, err := s.Prune(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 7, n)
	assert.Equal(t, 3, rows(t, pool, schema))
	n, err = s.Prune(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n)
}

// The background pruning deletes expired rows every PruneEvery, and stops at Close.
func TestBackgroundPrune(t *testing.T) {
	leakcheck.Check(t)
	pool := testPool(t)
	schema := testSchema(t, pool)
	s := openStore(t, pool, pgstore.Options{Schema: schema, PruneEvery: 20 * time.Millisecond})
	fill(t, s, "old", 4, 30*time.Millisecond)
	fill(t, s, "live", 1, time.Hour)
	deadline := time.Now().Add(3 * time.Second)
	for rows(t, pool, schema) != 1 {
		require.True(t, time.Now().Before(deadline), "expired rows still there after 3 s: %d rows", rows(t, pool, schema))
		time.Sleep(10 * time.Millisecond)
	}
	s.Close()
	s.Close() // a second Close does nothing
}
