// migrate.go creates and upgrades the Store's table: schema.sql and schema_v4.sql, embedded and versioned,
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

// SchemaVersion is the version of the tables Migrate creates.
const SchemaVersion = 4

var (
	//go:embed schema.sql
	schemaV3 string
	//go:embed schema_v4.sql
	schemaV4 string
)

// migrations are the scripts of each version, in order: a schema at version v runs
// those after it. A shipped script is never edited; a change is a new version.
var migrations = []struct {
	version int
	sql     string
}{
	{3, schemaV3}, // versions 1 to 3, each statement idempotent
	{4, schemaV4},
}

// Migrate creates, in opts.Schema, the tables and index the Store needs, or
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
		for _, m := range migrations {
			if m.version <= have {
				continue
			}
			if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{{schema}}", schema)); err != nil {
				return fail(fmt.Errorf("to version %d: %w", m.version, err))
			}
		}
		// One transaction: the version reached is recorded once.
		if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.server_version (version) VALUES ($1)`, SchemaVersion); err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return nil
}
