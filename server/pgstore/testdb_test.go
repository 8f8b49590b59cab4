// testdb_test.go connects the tests to the real PostgreSQL server: its address from
// IDEM_POSTGRES_URL, a random schema per test, dropped when the test ends
// (internal/pgtest, shared with the other PostgreSQL packages).

package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/server/pgstore"
)

// testPool connects to the test server, closed when t ends. If the server does not
// answer, it fails t when CI is set and skips it otherwise.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return pgtest.Connect(t, pgtest.URL(), pgxpool.New, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
}

// testSchema returns a fresh schema name, dropped with everything in it when t ends.
func testSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return pgtest.Schema(t, "idem_pgstore_", pool.Exec)
}

// openStore opens a Store on pool in schema, closed when t ends.
func openStore(t testing.TB, pool *pgxpool.Pool, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pool, &opts)
	if err != nil {
		t.Fatalf("Open schema %s: %v", opts.Schema, err)
	}
	t.Cleanup(s.Close)
	return s
}
