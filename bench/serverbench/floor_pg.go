// This file holds the PostgreSQL floor's keeper: one table keyed by the
// idempotency key, the claim one INSERT … ON CONFLICT DO NOTHING, the
// completion one UPDATE of the answer, each its own commit (autocommit, as
// pgstore's are); a copy that finds the key reads it with one SELECT. The
// expires_at column is written for a pruning job (not run here), and not
// indexed, so the UPDATE can be a HOT update.

package serverbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const pgFloorTable = "floor_records"

// createPGFloor creates the floor's table in schema, which exists.
func createPGFloor(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	return createTable(ctx, pool, schema, pgFloorTable, `key text PRIMARY KEY, answer bytea, expires_at timestamptz NOT NULL`)
}

// createTable creates table schema.name with the columns cols.
func createTable(ctx context.Context, pool *pgxpool.Pool, schema, name, cols string) error {
	_, err := pool.Exec(ctx, `CREATE TABLE `+pgx.Identifier{schema, name}.Sanitize()+` (`+cols+`)`)
	return err
}

// pgKeeper is safe for concurrent use.
type pgKeeper struct {
	pool                            *pgxpool.Pool
	claimSQL, completeSQL, fetchSQL string // the statements, on the schema's table
}

func newPGFloor(next http.Handler, pool *pgxpool.Pool, schema string, ttl time.Duration) *floor {
	t := pgx.Identifier{schema, pgFloorTable}.Sanitize()
	return &floor{next: next, k: &pgKeeper{
		pool:        pool,
		claimSQL:    fmt.Sprintf(`INSERT INTO %s (key, expires_at) VALUES ($1, now() + interval '%d seconds') ON CONFLICT DO NOTHING`, t, int64(ttl.Seconds())),
		completeSQL: `UPDATE ` + t + ` SET answer = $2 WHERE key = $1`,
		fetchSQL:    `SELECT answer FROM ` + t + ` WHERE key = $1`,
	}}
}

func (k *pgKeeper) claim(ctx context.Context, key string) (bool, []byte, error) {
	tag, err := k.pool.Exec(ctx, k.claimSQL, key)
	if err != nil || tag.RowsAffected() > 0 {
		return err == nil, nil, err
	}
	var stored []byte
	switch err := k.pool.QueryRow(ctx, k.fetchSQL, key).Scan(&stored); {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil, nil // expired and pruned since the claim failed
	case err != nil:
		return false, nil, err
	}
	return false, stored, nil
}

func (k *pgKeeper) complete(ctx context.Context, key string, stored []byte) {
	k.pool.Exec(context.WithoutCancel(ctx), k.completeSQL, key, stored)
}
