// This file holds the PostgreSQL contract floor's keeper: the PostgreSQL
// floor's table with the contract's columns (fingerprint, the claim's token,
// the lease's end on the database's clock), the claim one INSERT … ON
// CONFLICT DO NOTHING, the completion one UPDATE conditional on the token
// (fencing), each its own commit; a copy that finds the key reads it with
// one SELECT. As the floor's, expires_at is for a pruning job (not run
// here), and no index covers a column the completion changes, so it can be
// a HOT update.

package serverbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const pgContractTable = "contract_floor_records"

// createPGContractFloor creates the contract floor's table in schema, which
// exists.
func createPGContractFloor(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	return createTable(ctx, pool, schema, pgContractTable, `scope text PRIMARY KEY, fingerprint text NOT NULL,
		token text NOT NULL, leased_until timestamptz, answer bytea, expires_at timestamptz NOT NULL`)
}

// pgContractKeeper is safe for concurrent use.
type pgContractKeeper struct {
	pool                            *pgxpool.Pool
	claimSQL, completeSQL, fetchSQL string // the statements, on the schema's table
}

func newPGContractFloor(next http.Handler, pool *pgxpool.Pool, schema string, lease, ttl time.Duration) *contractFloor {
	t := pgx.Identifier{schema, pgContractTable}.Sanitize()
	expires := fmt.Sprintf(`now() + interval '%d seconds'`, int64(ttl.Seconds()))
	return &contractFloor{next: next, lease: lease, storeTimeout: server.DefaultStoreTimeout, k: &pgContractKeeper{
		pool: pool,
		claimSQL: fmt.Sprintf(`INSERT INTO %s (scope, fingerprint, token, leased_until, expires_at)
			VALUES ($1, $2, $3, now() + interval '%d milliseconds', %s) ON CONFLICT DO NOTHING`, t, lease.Milliseconds(), expires),
		completeSQL: `UPDATE ` + t + ` SET answer = $3, leased_until = NULL, expires_at = ` + expires +
			` WHERE scope = $1 AND token = $2 AND answer IS NULL`,
		fetchSQL: `SELECT fingerprint, answer FROM ` + t + ` WHERE scope = $1`,
	}}
}

func (k *pgContractKeeper) claim(ctx context.Context, scope, fp, token string) (contractRecord, bool, error) {
	tag, err := k.pool.Exec(ctx, k.claimSQL, scope, fp, token)
	if err != nil || tag.RowsAffected() > 0 {
		return contractRecord{}, err == nil, err
	}
	var rec contractRecord
	var answer []byte
	switch err := k.pool.QueryRow(ctx, k.fetchSQL, scope).Scan(&rec.fingerprint, &answer); {
	case errors.Is(err, pgx.ErrNoRows):
		return contractRecord{fingerprint: fp}, false, nil // pruned since the claim failed: in progress, as the floor
	case err != nil:
		return contractRecord{}, false, err
	}
	if answer != nil {
		rec.answer, err = decodeAnswer(answer)
	}
	return rec, false, err
}

func (k *pgContractKeeper) complete(ctx context.Context, scope, _, token string, a *contractAnswer) error {
	_, err := k.pool.Exec(ctx, k.completeSQL, scope, token, a.encode(nil))
	return err
}
