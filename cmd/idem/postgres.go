// This file lets the journal commands and chaos take a PostgreSQL journal
// (journal/pgjournal) where they take a bbolt file: a postgres:// URL whose
// schema and namespace query parameters name the journal, the rest going to
// pgx as it is.

package main

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgTarget is a PostgreSQL journal named on the command line.
type pgTarget struct {
	conn string // the URL for pgx, without schema and namespace
	opts pgjournal.Options
}

// isPostgres reports whether arg names a PostgreSQL journal rather than a
// file.
func isPostgres(arg string) bool {
	return strings.HasPrefix(arg, "postgres://") || strings.HasPrefix(arg, "postgresql://")
}

// parsePostgres reads a journal URL:
// postgres://user@host:port/db?sslmode=disable&schema=S&namespace=N. schema
// and namespace default to pgjournal's defaults; pgx gets the rest.
func parsePostgres(arg string) (*pgTarget, error) {
	u, err := url.Parse(arg)
	if err != nil {
		return nil, fmt.Errorf("journal URL: %w", err)
	}
	q := u.Query()
	t := &pgTarget{opts: pgjournal.Options{Schema: q.Get("schema"), Namespace: q.Get("namespace")}}
	q.Del("schema")
	q.Del("namespace")
	u.RawQuery = q.Encode()
	t.conn = u.String()
	if _, err := pgxpool.ParseConfig(t.conn); err != nil {
		return nil, fmt.Errorf("journal URL: %w", err)
	}
	return t, nil
}

// String names the journal without the URL's password.
func (t *pgTarget) String() string {
	u, _ := url.Parse(t.conn)
	u.User = url.User(u.User.Username())
	u.RawQuery = ""
	return fmt.Sprintf("%s schema %s namespace %q", u.Redacted(),
		cmp.Or(t.opts.Schema, pgjournal.DefaultSchema), cmp.Or(t.opts.Namespace, pgjournal.DefaultNamespace))
}

// displayName is how messages name a journal argument: a file's path, a
// PostgreSQL journal or a journal view's URL without its password.
func displayName(arg string) string {
	if isView(arg) {
		u, err := url.Parse(arg)
		if err != nil {
			return "(an invalid URL)"
		}
		return u.Redacted()
	}
	if !isPostgres(arg) {
		return arg
	}
	t, err := parsePostgres(arg)
	if err != nil {
		return "(an invalid postgres:// URL)"
	}
	return t.String()
}

// connect opens a pool and checks that the server answers within 5 s.
func (t *pgTarget) connect(ctx context.Context) (*pgxpool.Pool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, t.conn)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return pool, nil
}

// records reads every operation, pending first, then the finished ones,
// each group oldest first, as a bbolt journal lists them. It only reads. A
// namespace nobody opened lists as empty: see inspect.
func (t *pgTarget) records(ctx context.Context, withBody bool) ([]*idem.Record, error) {
	pool, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return t.list(ctx, pool, withBody)
}

// inspect is records for an operator (journal ls, show, stats): a namespace
// that is not there is refused (knownNamespace) rather than listed empty.
func (t *pgTarget) inspect(ctx context.Context, withBody bool) ([]*idem.Record, error) {
	pool, err := t.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := t.knownNamespace(ctx, pool); err != nil {
		return nil, err
	}
	return t.list(ctx, pool, withBody)
}

// knownNamespace refuses a namespace no Journal was ever opened on, naming
// those there are. A misspelt one would otherwise read as a journal with
// nothing pending, while payments are, and a prune or resume would create
// it.
func (t *pgTarget) knownNamespace(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := pgjournal.Namespaces(ctx, pool, &t.opts)
	if err != nil {
		return fmt.Errorf("%s: %w", t, err)
	}
	if slices.Contains(names, cmp.Or(t.opts.Namespace, pgjournal.DefaultNamespace)) {
		return nil
	}
	there := "none"
	if len(names) > 0 {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = strconv.Quote(n)
		}
		there = strings.Join(quoted, ", ")
	}
	return fmt.Errorf("%s: no such namespace (a typo?); the namespaces in schema %s: %s", t,
		cmp.Or(t.opts.Schema, pgjournal.DefaultSchema), there)
}

// list reads every operation over pool, as records does.
func (t *pgTarget) list(ctx context.Context, pool *pgxpool.Pool, withBody bool) ([]*idem.Record, error) {
	var recs []*idem.Record
	for rec, err := range pgjournal.Records(ctx, pool, &t.opts, withBody) {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		recs = append(recs, rec)
	}
	slices.SortStableFunc(recs, func(a, b *idem.Record) int {
		return boolOrder(a.State != idem.StatePending, b.State != idem.StatePending)
	})
	return recs, nil
}

// boolOrder orders false before true.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// open opens the journal for writing. Unless create is set (a chaos
// worker), it refuses a schema that holds no journal, or a namespace that
// is not there, rather than creating it (prune, resume). Close the
// Journal, then the pool.
func (t *pgTarget) open(ctx context.Context, create bool) (*pgxpool.Pool, *pgjournal.Journal, error) {
	pool, err := t.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !create {
		if err := t.knownNamespace(ctx, pool); err != nil { // no journal tables, or not this namespace
			pool.Close()
			return nil, nil, err
		}
	}
	j, err := pgjournal.Open(ctx, pool, &t.opts)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("%s: %w", t, err)
	}
	return pool, j, nil
}
