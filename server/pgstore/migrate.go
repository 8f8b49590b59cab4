// migrate.go creates and upgrades the Store's table: schema.sql, embedded and versioned,
// applied once per schema under a transaction-scoped advisory lock, its version kept in a
// table of its own.

package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the version of the tables schema.sql creates.
const SchemaVersion = 3

//go:embed schema.sql
var schemaSQL string

// Migrate creates, in opts.Schema, the table, index and sequence the Store needs, or
// upgrades them to SchemaVersion. It is idempotent and safe to run from many instances at
// once: they take turns on an advisory lock derived from the schema's name, held until
// the migration's transaction ends. Open calls it. It returns an error wrapping
// ErrNewerSchema for a schema written by a newer pgstore, and one wrapping
// ErrInvalidOptions for a nil pool or bad opts.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *Options) error {
	c, err := opts.resolved()
	if err != nil {
		return err
	}
	if pool == nil {
		return fmt.Errorf("%w: nil *pgxpool.Pool", ErrInvalidOptions)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidOptions)
	}
	schema := pgx.Identifier{c.Schema}.Sanitize()
	fail := func(err error) error { return fmt.Errorf("pgstore: migrate schema %s: %w", c.Schema, err) }
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	h := fnv.New64a()
	h.Write([]byte("idem pgstore " + c.Schema))
	for _, q := range []string{
		`SELECT pg_advisory_xact_lock(` + fmt.Sprint(int64(h.Sum64())) + `)`,
		`CREATE SCHEMA IF NOT EXISTS ` + schema,
		`CREATE TABLE IF NOT EXISTS ` + schema + `.server_version (version integer NOT NULL)`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fail(err)
		}
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+schema+`.server_version`).Scan(&have); err != nil {
		return fail(err)
	}
	switch {
	case have > SchemaVersion:
		return fail(fmt.Errorf("%w: version %d, this pgstore knows %d", ErrNewerSchema, have, SchemaVersion))
	case have < SchemaVersion:
		if _, err := tx.Exec(ctx, strings.ReplaceAll(schemaSQL, "{{schema}}", schema)); err != nil {
			return fail(fmt.Errorf("to version %d: %w", SchemaVersion, err))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.server_version (version) VALUES ($1)`, SchemaVersion); err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return nil
}
