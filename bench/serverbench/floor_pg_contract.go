// This file holds the PostgreSQL contract floor's keeper: the PostgreSQL
// floor's table with the contract's columns (fingerprint, the claim's token,
// the lease's end on the database's clock), the claim one INSERT … ON
// CONFLICT DO NOTHING, the completion one UPDATE conditional on the token
// (fencing), each its own commit; a copy that finds the key reads it with
// one SELECT. Two more things the contract asks of any such store: a claim
// arriving after its own token was released (its reply lost, the call
// repeated and given up) is refused, or it would make a record no handler
// runs (DESIGN: a store call whose reply was lost never leaves a key stuck);
// and the expired rows a pruning job deletes are found through an index, so
// the table stays bounded without scanning it. The TTL counts from the
// claim, so the completion changes no indexed column and stays a HOT update.

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

const (
	pgContractTable    = "contract_floor_records"
	pgContractReleased = "contract_floor_released" // the tokens released, for the claims that come late
)

// createPGContractFloor creates the contract floor's tables in schema, which
// exists.
func createPGContractFloor(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	err := createTable(ctx, pool, schema, pgContractTable, `scope text PRIMARY KEY, fingerprint text NOT NULL,
		token text NOT NULL, leased_until timestamptz, answer bytea, expires_at timestamptz NOT NULL`)
	if err == nil {
		err = createTable(ctx, pool, schema, pgContractReleased, `scope text, token text, PRIMARY KEY (scope, token)`)
	}
	if err == nil {
		_, err = pool.Exec(ctx, `CREATE INDEX ON `+pgx.Identifier{schema, pgContractTable}.Sanitize()+` (expires_at)`)
	}
	return err
}

// pgContractKeeper is safe for concurrent use.
type pgContractKeeper struct {
	pool                                        *pgxpool.Pool
	claimSQL, completeSQL, fetchSQL, releaseSQL string // the statements, on the schema's tables
}

func newPGContractFloor(next http.Handler, pool *pgxpool.Pool, schema string, lease, ttl time.Duration) *contractFloor {
	t := pgx.Identifier{schema, pgContractTable}.Sanitize()
	rel := pgx.Identifier{schema, pgContractReleased}.Sanitize()
	return &contractFloor{next: next, lease: lease, storeTimeout: server.DefaultStoreTimeout, k: &pgContractKeeper{
		pool: pool,
		claimSQL: fmt.Sprintf(`INSERT INTO %s (scope, fingerprint, token, leased_until, expires_at)
			SELECT $1, $2, $3, now() + interval '%d milliseconds', now() + interval '%d seconds'
			WHERE NOT EXISTS (SELECT FROM %s WHERE scope = $1 AND token = $3) ON CONFLICT DO NOTHING`,
			t, lease.Milliseconds(), int64(ttl.Seconds()), rel),
		completeSQL: `UPDATE ` + t + ` SET answer = $3, leased_until = NULL WHERE scope = $1 AND token = $2 AND answer IS NULL`,
		fetchSQL:    `SELECT fingerprint, answer FROM ` + t + ` WHERE scope = $1`,
		releaseSQL: `WITH gone AS (DELETE FROM ` + t + ` WHERE scope = $1 AND token = $2 AND answer IS NULL)
			INSERT INTO ` + rel + ` (scope, token) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
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

// release gives up token's claim on scope, whose handler never ran: the
// record goes, and a claim with that token arriving later is refused. The
// floor's middleware never needs it (its stores do not fail in the bench);
// it is here for the claim's check to be tested against.
func (k *pgContractKeeper) release(ctx context.Context, scope, token string) error {
	_, err := k.pool.Exec(ctx, k.releaseSQL, scope, token)
	return err
}
