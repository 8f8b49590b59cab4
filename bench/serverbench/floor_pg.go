// This file holds the PostgreSQL floor middleware: one table keyed by the
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
	_, err := pool.Exec(ctx, `CREATE TABLE `+pgx.Identifier{schema, pgFloorTable}.Sanitize()+
		` (key text PRIMARY KEY, answer bytea, expires_at timestamptz NOT NULL)`)
	return err
}

// pgFloor is safe for concurrent use.
type pgFloor struct {
	next                   http.Handler
	pool                   *pgxpool.Pool
	claim, complete, fetch string // the statements, on the schema's table
}

func newPGFloor(next http.Handler, pool *pgxpool.Pool, schema string, ttl time.Duration) *pgFloor {
	t := pgx.Identifier{schema, pgFloorTable}.Sanitize()
	return &pgFloor{
		next:     next,
		pool:     pool,
		claim:    fmt.Sprintf(`INSERT INTO %s (key, expires_at) VALUES ($1, now() + interval '%d seconds') ON CONFLICT DO NOTHING`, t, int64(ttl.Seconds())),
		complete: `UPDATE ` + t + ` SET answer = $2 WHERE key = $1`,
		fetch:    `SELECT answer FROM ` + t + ` WHERE key = $1`,
	}
}

func (f *pgFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(keyHeader)
	if key == "" {
		f.next.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	tag, err := f.pool.Exec(ctx, f.claim, key)
	if err != nil {
		unavailable(w)
		return
	}
	if tag.RowsAffected() == 0 {
		var stored []byte
		err := f.pool.QueryRow(ctx, f.fetch, key).Scan(&stored)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || err == nil && stored == nil:
			conflict(w)
		case err != nil:
			unavailable(w)
		default:
			replay(w, stored)
		}
		return
	}
	c := &capture{ResponseWriter: w}
	f.next.ServeHTTP(c, r)
	f.pool.Exec(context.WithoutCancel(ctx), f.complete, key, c.stored()) // stored even if its client left
}
