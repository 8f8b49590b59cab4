// This file connects the tests to a real PostgreSQL server: its address
// from IDEM_POSTGRES_URL, a schema of their own, dropped when they end.

package pgjournal

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultURL is the local server the tests use unless IDEM_POSTGRES_URL
// names another.
const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testPool connects to the test server, or fails the test when CI is set
// and skips it otherwise if the server does not answer.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv("IDEM_POSTGRES_URL")
	if url == "" {
		url = defaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s: %v (CI is set: the server must run)", url, err)
		}
		t.Skipf("PostgreSQL not reachable at %s (set IDEM_POSTGRES_URL): %v", url, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// testSchema returns a fresh schema name, dropped with its tables when t
// ends.
func testSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	schema := "idem_test_" + uuid.New().String()[:8]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
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
