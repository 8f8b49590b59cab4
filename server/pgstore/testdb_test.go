// testdb_test.go connects the tests to the real PostgreSQL server: its address from
// IDEM_POSTGRES_URL, a random schema per test, dropped when the test ends.

package pgstore_test

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-go/idem/server/pgstore"
)

// defaultURL is the local server the tests use unless IDEM_POSTGRES_URL names another.
const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func testURL() string {
	if u := os.Getenv("IDEM_POSTGRES_URL"); u != "" {
		return u
	}
	return defaultURL
}

// testPool connects to the test server, closed when t ends. If the server does not
// answer, it fails t when CI is set and skips it otherwise.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := testURL()
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

// testSchema returns a fresh schema name, dropped with everything in it when t ends.
func testSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	schema := "idem_pgstore_" + strings.ToLower(rand.Text()[:10])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
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
