// Package pgtest connects the tests of the PostgreSQL packages (pgjournal,
// pgstore, brokertest, the idem command) to the server they run against: its
// address, what a test does when it does not answer, and a schema of the
// test's own. It imports no driver, so that the root module needs none: each
// package passes what opens its own client and runs a statement on it.
package pgtest

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"
)

// DefaultURL is the local server the tests use unless IDEM_POSTGRES_URL
// names another.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL is the test server's address: IDEM_POSTGRES_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("IDEM_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Unavailable ends tb for a service that does not answer (what names it and
// how to point at another): it fails tb when CI is set, where every service
// must run, and skips it otherwise.
func Unavailable(tb testing.TB, what string, err error) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s: %v (CI is set: the server must run)", what, err)
	}
	tb.Skipf("%s not reachable: %v", what, err)
}

// Connect returns a client of the server at url, opened by open (pgxpool.New)
// and checked by ping within 5 s, and closed by closeFn when tb ends. When the
// server does not answer, Connect closes what open returned and ends tb as
// Unavailable does.
func Connect[C any](tb testing.TB, url string, open func(ctx context.Context, url string) (C, error),
	ping func(C, context.Context) error, closeFn func(C)) C {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := open(ctx, url)
	if err == nil {
		if err = ping(c, ctx); err != nil {
			closeFn(c)
		}
	}
	if err != nil {
		Unavailable(tb, "PostgreSQL at "+url+" (set IDEM_POSTGRES_URL)", err)
	}
	tb.Cleanup(func() { closeFn(c) })
	return c
}

// Schema returns a schema name no other test uses, prefix and 8 random
// characters, and drops that schema with everything in it when tb ends,
// running the statement with exec (a pool's Exec).
func Schema[R any](tb testing.TB, prefix string, exec func(ctx context.Context, sql string, args ...any) (R, error)) string {
	tb.Helper()
	schema := prefix + strings.ToLower(rand.Text()[:8])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := exec(ctx, `DROP SCHEMA IF EXISTS `+QuoteIdent(schema)+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// QuoteIdent quotes name as an SQL identifier, as pgx.Identifier.Sanitize
// does.
func QuoteIdent(name string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(name, "\x00", ""), `"`, `""`) + `"`
}
