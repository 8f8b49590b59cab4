// This file creates and upgrades the journal's tables: schema.sql (version
// 1), then each later schema_N.sql in turn, applied once per schema under
// an advisory lock, the version reached kept in the schema.

package pgjournal

import (
	"context"
	_ "embed"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed schema.sql
var schema1 string

//go:embed schema_2.sql
var schema2 string

// migrations[v-1] takes the tables from version v-1 to version v: 1
// creates them, 2 adds sealed rows (Options.Encryption).
var migrations = [...]string{schema1, schema2}

// schemaVersion is the version Migrate brings the tables to.
const schemaVersion = len(migrations)

// Migrate creates, in opts.Schema, the tables the journal needs, or
// upgrades them to this version; it is idempotent and safe to run from
// several instances at once (they take turns on an advisory lock). Open
// calls it. A schema written by a newer version of pgjournal is refused.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *Options) error {
	c, err := opts.resolved()
	if err != nil {
		return err
	}
	if pool == nil {
		return errNilPool
	}
	if ctx == nil {
		return errNilContext
	}
	schema := pgx.Identifier{c.Schema}.Sanitize()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgjournal: migrate %s: %w", c.Schema, err)
	}
	defer tx.Rollback(ctx)
	h := fnv.New64a()
	h.Write([]byte("idem pgjournal " + c.Schema))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
		return fmt.Errorf("pgjournal: migrate %s: %w", c.Schema, err)
	}
	if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema); err != nil {
		return fmt.Errorf("pgjournal: migrate %s: %w", c.Schema, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+schema+`.version (version int NOT NULL)`); err != nil {
		return fmt.Errorf("pgjournal: migrate %s: %w", c.Schema, err)
	}
	var have int
	err = tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+schema+`.version`).Scan(&have)
	if err != nil {
		return fmt.Errorf("pgjournal: migrate %s: %w", c.Schema, err)
	}
	switch {
	case have > schemaVersion:
		return fmt.Errorf("pgjournal: schema %s is at version %d, newer than this pgjournal's %d", c.Schema, have, schemaVersion)
	case have == schemaVersion:
		return tx.Commit(ctx)
	}
	for v := have + 1; v <= schemaVersion; v++ {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(migrations[v-1], "{{schema}}", schema)); err != nil {
			return fmt.Errorf("pgjournal: migrate %s to version %d: %w", c.Schema, v, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.version (version) VALUES ($1)`, v); err != nil {
			return fmt.Errorf("pgjournal: migrate %s: %w", c.Schema, err)
		}
	}
	return tx.Commit(ctx)
}
