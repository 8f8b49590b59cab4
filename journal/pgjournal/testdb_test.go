// This file connects the tests to a real PostgreSQL server: its address
// from IDEM_POSTGRES_URL, a schema of their own, dropped when they end
// (internal/pgtest, shared with the other PostgreSQL packages).

package pgjournal

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/idem-go/idem/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testPool connects to the test server (pgtest.URL), or fails the test when
// CI is set and skips it otherwise if the server does not answer.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return pgtest.Connect(t, pgtest.URL(), pgxpool.New, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
}

// testSchema returns a fresh schema name, dropped with its tables when t
// ends.
func testSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return pgtest.Schema(t, "idem_test_", pool.Exec)
}

// openTest opens a Journal on opts, closed when t ends.
func openTest(t testing.TB, pool *pgxpool.Pool, opts Options) *Journal {
	t.Helper()
	j, err := Open(context.Background(), pool, &opts)
	if err != nil {
		t.Fatalf("Open %s/%s: %v", opts.Schema, opts.Namespace, err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// namespace returns a namespace no other test uses.
func namespace(t testing.TB) string { return fmt.Sprintf("%s-%s", t.Name(), uuid.New().String()[:8]) }
