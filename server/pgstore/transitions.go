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

	"github.com/idem-go/idem/server"
)

// Renew implements server.Store. A lease of 0 ends the lease now.
func (s *Store) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	return fenced("renew")(s.exec(ctx, s.q.renew, sc.ID(), token, micros(lease)))
}

// Complete implements server.Store.
func (s *Store) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	return s.complete(s.onPool(ctx), sc, token, resp, ttl)
}

// Release implements server.Store. The row is deleted.
func (s *Store) Release(ctx context.Context, sc server.Scope, token string) error {
	db := s.onPool(ctx)
	err := fenced("release")(db.exec(s.q.release, sc.ID(), token, micros(server.ReleasedTokenTTL)))
	if !errors.Is(err, server.ErrLeaseLost) || token == "" {
		return err
	}
	var mine, inProgress bool
	switch err := db.queryRow(s.q.own, []any{sc.ID(), token}, &mine, &inProgress); {
	case err == nil:
		return server.ErrLeaseLost // done, or another token's
	case !errors.Is(err, errNoRow):
		return fmt.Errorf("pgstore: release: %w", err)
	}
	// Gone already, as Release wants; a claim with this token still on its way must not
	// make a record now.
	if _, err := db.exec(s.q.remember, sc.ID(), token, micros(server.ReleasedTokenTTL)); err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	return nil
}

// TakeOver implements server.Store. Of concurrent take-overs, the first UPDATE to lock the
// row changes its token; the others, re-checking the row once it is committed, match
// nothing.
func (s *Store) TakeOver(ctx context.Context, sc server.Scope, stale, token string, lease time.Duration) error {
	if token == "" {
		return errors.New("pgstore: take over: empty token")
	}
	db := s.onPool(ctx)
	err := fenced("take over")(db.exec(s.q.takeOver, sc.ID(), stale, micros(lease), token))
	if errors.Is(err, server.ErrLeaseLost) {
		return s.repeated(db, "take over", sc, token, func(mine, inProgress, found bool) bool { return found && mine && inProgress })
	}
	return err
}

// CompleteTx completes the record the request runs under (hold, from server.HoldFrom)
// with resp inside tx, the service's own transaction, so that the business rows the
// handler wrote in tx and the stored response commit together, or neither does. The TTL
// is Options.TTL. ctx should be the request's context (or derive from it): CompleteTx
// first calls server.MarkCompleted on it, declaring that the handler's effects are in tx.
//
// resp is what the handler then writes to its client: it is what every retry replays once
// tx commits. The row stays locked until tx ends, so no other instance can take the record
// over in between; a concurrent copy of the request waits for tx to end (at most
// Options.StatementTimeout) rather than see a half-made state. The lease is judged by the
// database's clock when the statement runs, not when tx began.
//
// When the handler returns, the middleware releases the record if it is still in progress
// under the request's token: tx rolled back (or never committed), so nothing happened and
// a retry runs the handler again. If tx committed, the record is done and the release is
// refused, as expected.
//
// It returns server.ErrLeaseLost, changing nothing, if hold no longer holds the record
// (its lease lapsed and another instance took it over, or it is done or gone): roll tx
// back, since another holder now answers for the key. A nil resp is an error before any
// statement; any other error is the database's, and tx is then aborted.
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, hold server.Hold, resp *server.Response) error {
	server.MarkCompleted(ctx)
	if err := s.complete(inTx(ctx, tx), hold.Scope, hold.Token, resp, s.opts.TTL); err != nil {
		return err
	}
	return nil
}

// CompleteSQLTx is CompleteTx for a database/sql transaction, on a PostgreSQL driver that
// takes $n placeholders (pgx's stdlib, lib/pq).
func (s *Store) CompleteSQLTx(ctx context.Context, tx *sql.Tx, hold server.Hold, resp *server.Response) error {
	server.MarkCompleted(ctx)
	if err := s.complete(inSQLTx(ctx, tx), hold.Scope, hold.Token, resp, s.opts.TTL); err != nil {
		return err
	}
	return nil
}

func (s *Store) complete(db db, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	if resp == nil {
		return errors.New("pgstore: complete: nil response")
	}
	body := resp.Body
	if body == nil {
		body = []byte{} // NULL is for a record without a response
	}
	err := fenced("complete")(db.exec(s.q.complete, sc.ID(), token, micros(ttl),
		int32(resp.Status), server.AppendHeader(nil, resp.Header), body, resp.Unreplayable))
	if errors.Is(err, server.ErrLeaseLost) {
		return s.repeated(db, "complete", sc, token, func(mine, inProgress, found bool) bool { return found && mine && !inProgress })
	}
	return err
}

// repeated runs after a transition matched no row: it reads the live row for sc and
// returns nil if made reports that the transition had been made already by token (a
// repeat whose first reply was lost), server.ErrLeaseLost otherwise.
func (s *Store) repeated(db db, what string, sc server.Scope, token string, made func(mine, inProgress, found bool) bool) error {
	var mine, inProgress bool
	err := db.queryRow(s.q.own, []any{sc.ID(), token}, &mine, &inProgress)
	found := err == nil
	switch {
	case err != nil && !errors.Is(err, errNoRow):
		return fmt.Errorf("pgstore: %s: %w", what, err)
	case made(mine, inProgress, found):
		return nil
	}
	return server.ErrLeaseLost
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
