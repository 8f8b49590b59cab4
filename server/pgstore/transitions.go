// transitions.go holds the Store's fenced transitions (Renew, Complete, Release,
// TakeOver), each one statement conditional on the holder's token, and CompleteTx and
// CompleteSQLTx, the completion inside the service's own transaction (pgx or database/sql).

package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idem-go/idem/server"
)

// Renew implements server.Store.
func (s *Store) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	return fenced("renew")(pgxExec(ctx, s.pool)(s.q.renew, sc.ID(), token, micros(lease)))
}

// Complete implements server.Store.
func (s *Store) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	return s.complete(pgxExec(ctx, s.pool), sc, token, resp, ttl)
}

// Release implements server.Store. The row is deleted.
func (s *Store) Release(ctx context.Context, sc server.Scope, token string) error {
	return fenced("release")(pgxExec(ctx, s.pool)(s.q.release, sc.ID(), token))
}

// TakeOver implements server.Store. Of concurrent take-overs, the first UPDATE to lock the
// row changes its token; the others, re-checking the row once it is committed, match
// nothing.
func (s *Store) TakeOver(ctx context.Context, sc server.Scope, stale string, lease time.Duration) (string, error) {
	var token string
	err := s.pool.QueryRow(ctx, s.q.takeOver, sc.ID(), stale, micros(lease)).Scan(&token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", server.ErrLeaseLost
	case err != nil:
		return "", fmt.Errorf("pgstore: take over: %w", err)
	}
	return token, nil
}

// CompleteTx completes the record the request runs under (hold, from server.HoldFrom)
// with resp inside tx, the service's own transaction, so that the business rows the
// handler wrote in tx and the stored response commit together, or neither does. The TTL
// is Options.TTL, from tx's now() (its start). ctx should be the request's context (or
// derive from it): on success CompleteTx calls server.MarkCompleted on it, so the
// middleware expects its own completion afterwards to be refused.
//
// resp is what the handler then writes to its client: it is what every retry replays once
// tx commits. The row stays locked until tx ends, so no other instance can take the record
// over in between; a concurrent copy of the request waits for tx to end rather than see a
// half-made state.
//
// If tx rolls back, the record is as before: in progress under the request's token, and
// the middleware completes or releases it by its policy on the answer the handler writes
// (a 5xx releases the key, so a retry runs the handler again, this time possibly with
// success).
//
// It returns server.ErrLeaseLost, changing nothing, if hold no longer holds the record
// (its lease lapsed and another instance took it over, or it is done or gone): roll tx
// back, since another holder now answers for the key. A nil resp is an error before any
// statement; any other error is the database's, and tx is then aborted.
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, hold server.Hold, resp *server.Response) error {
	if err := s.complete(pgxExec(ctx, tx), hold.Scope, hold.Token, resp, s.opts.TTL); err != nil {
		return err
	}
	server.MarkCompleted(ctx)
	return nil
}

// CompleteSQLTx is CompleteTx for a database/sql transaction, on a PostgreSQL driver that
// takes $n placeholders (pgx's stdlib, lib/pq).
func (s *Store) CompleteSQLTx(ctx context.Context, tx *sql.Tx, hold server.Hold, resp *server.Response) error {
	exec := func(q string, args ...any) (int64, error) {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	if err := s.complete(exec, hold.Scope, hold.Token, resp, s.opts.TTL); err != nil {
		return err
	}
	server.MarkCompleted(ctx)
	return nil
}

// execFunc runs one statement (on the pool, or in the caller's transaction) and returns
// how many rows it changed.
type execFunc func(q string, args ...any) (int64, error)

// pgxExec is an execFunc for a pool or a pgx.Tx.
func pgxExec(ctx context.Context, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}) execFunc {
	return func(q string, args ...any) (int64, error) {
		tag, err := db.Exec(ctx, q, args...)
		return tag.RowsAffected(), err
	}
}

func (s *Store) complete(exec execFunc, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	if resp == nil {
		return errors.New("pgstore: complete: nil response")
	}
	body := resp.Body
	if body == nil {
		body = []byte{} // NULL is for a record without a response
	}
	return fenced("complete")(exec(s.q.complete, sc.ID(), token, micros(ttl),
		int32(resp.Status), server.AppendHeader(nil, resp.Header), body, resp.Unreplayable))
}

// fenced turns the result of a fenced statement into the transition's error: none if it
// changed a row, server.ErrLeaseLost if it matched none.
func fenced(what string) func(int64, error) error {
	return func(rows int64, err error) error {
		switch {
		case err != nil:
			return fmt.Errorf("pgstore: %s: %w", what, err)
		case rows == 0:
			return server.ErrLeaseLost
		}
		return nil
	}
}
