// pooltimeouts.go decides, at Open, whether the pool's connections already carry the
// Store's lock and statement timeouts from their start (ConnConfig.RuntimeParams), so that
// each statement can be sent alone instead of in a batch behind a set_config.

package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolTimeouts reports whether every connection pool opens starts with lock_timeout and
// statement_timeout both set, above zero and at most limit: the pool's config names both
// in RuntimeParams (startup parameters, which a role's or database's defaults do not
// override), and PostgreSQL, parsing those values in a transaction of its own,
// reads them as at most limit (set_config … is_local: nothing outlives that transaction). Anything else (a parameter missing, 0 meaning none, a
// longer value) is false: the Store then sets its own timeouts with each statement.
func poolTimeouts(ctx context.Context, pool *pgxpool.Pool, limit time.Duration) (bool, error) {
	params := pool.Config().ConnConfig.RuntimeParams
	lock, okLock := params["lock_timeout"]
	stmt, okStmt := params["statement_timeout"]
	if !okLock || !okStmt {
		return false, nil
	}
	var lockMS, stmtMS int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)`, lock, stmt); err != nil {
			return err
		}
		// pg_settings gives both in milliseconds, whatever unit the values were written in.
		return tx.QueryRow(ctx, `SELECT (SELECT setting::bigint FROM pg_settings WHERE name = 'lock_timeout'),
	(SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout')`).Scan(&lockMS, &stmtMS)
	})
	if err != nil {
		return false, err
	}
	ms := limit.Milliseconds()
	return lockMS > 0 && lockMS <= ms && stmtMS > 0 && stmtMS <= ms, nil
}
