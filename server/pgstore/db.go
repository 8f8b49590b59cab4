// db.go holds db, where a transition's statements run: on the Store's pool (under its
// timeouts) or in a service's transaction (pgx or database/sql). It is a plain value, so
// that choosing where costs a request no allocation.

package pgstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
)

// db runs the Store's statements in tx, in sqlTx, or, with neither, on s's pool.
type db struct {
	ctx   context.Context
	s     *Store
	tx    pgx.Tx
	sqlTx *sql.Tx
}

// errNoRow is what db.queryRow returns when the statement returned no row.
var errNoRow = errors.New("pgstore: no row")

// onPool is a db on the Store's pool.
func (s *Store) onPool(ctx context.Context) db { return db{ctx: ctx, s: s} }

// inTx is a db in tx, a pgx transaction of the service's.
func inTx(ctx context.Context, tx pgx.Tx) db { return db{ctx: ctx, tx: tx} }

// inSQLTx is a db in tx, a database/sql transaction of the service's.
func inSQLTx(ctx context.Context, tx *sql.Tx) db { return db{ctx: ctx, sqlTx: tx} }

// exec runs q and returns how many rows it changed.
func (d db) exec(q string, args ...any) (int64, error) {
	switch {
	case d.tx != nil:
		tag, err := d.tx.Exec(d.ctx, q, args...)
		return tag.RowsAffected(), err
	case d.sqlTx != nil:
		res, err := d.sqlTx.ExecContext(d.ctx, q, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	return d.s.exec(d.ctx, q, args...)
}

// queryRow runs q and scans its row into dest; errNoRow if it returned none.
func (d db) queryRow(q string, args []any, dest ...any) error {
	var err error
	switch {
	case d.tx != nil:
		err = d.tx.QueryRow(d.ctx, q, args...).Scan(dest...)
	case d.sqlTx != nil:
		err = d.sqlTx.QueryRowContext(d.ctx, q, args...).Scan(dest...)
	default:
		err = d.s.queryRow(d.ctx, scanFunc(func(r pgx.Row) error { return r.Scan(dest...) }), q, args...)
	}
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return errNoRow
	}
	return err
}
