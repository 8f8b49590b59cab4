// migrate_internal_test.go upgrades a schema that version 3 wrote, with rows in it, to
// the current version.

package pgstore

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A version-3 table keeps its rows through the upgrade, and Prune still finds the expired
// ones (prune_from '-infinity': judged by expires_at alone), and only those.
func TestMigrateFromVersion3(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Connect(t, pgtest.URL(), pgxpool.New, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
	name := pgtest.Schema(t, "idem_pgstore_", pool.Exec)
	schema := pgx.Identifier{name}.Sanitize()
	for _, q := range []string{
		`CREATE SCHEMA ` + schema,
		`CREATE TABLE ` + schema + `.server_version (version integer NOT NULL)`,
		strings.ReplaceAll(schemaV3, "{{schema}}", schema),
		`INSERT INTO ` + schema + `.server_version VALUES (3)`,
		`INSERT INTO ` + schema + `.server_records (scope, fingerprint, expires_at) VALUES
			('old', 'fp', clock_timestamp() - interval '1 hour'), ('live', 'fp', clock_timestamp() + interval '1 hour')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err := Open(ctx, pool, &Options{Schema: name, PruneEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var version int
	if err := pool.QueryRow(ctx, `SELECT max(version) FROM `+schema+`.server_version`).Scan(&version); err != nil || version != SchemaVersion {
		t.Fatalf("version %d, %v; want %d", version, err, SchemaVersion)
	}
	if n, err := s.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the one expired row", n, err)
	}
	var left string
	if err := pool.QueryRow(ctx, `SELECT string_agg(scope, ',') FROM `+schema+`.server_records`).Scan(&left); err != nil || left != "live" {
		t.Fatalf("rows left %q, %v; want live", left, err)
	}
}
