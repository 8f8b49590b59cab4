// store.go is the Store itself: Open, Close, and Claim, the one method that may create a
// record. transitions.go holds the fenced transitions (and CompleteTx), prune.go the
// deletion of expired rows.

package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-go/idem/server"
)

// Store is a server.Store on a PostgreSQL table shared by every instance of a service. Its
// clock is the database's: every lease and expiry is computed from clock_timestamp() in
// the statement that sets or reads it. Every statement it runs on the pool carries a lock
// and statement timeout (Options.StatementTimeout, or the pool's own if no longer), so a
// row held by a service's transaction (CompleteTx) makes a concurrent copy fail in bounded
// time instead of holding a pooled connection. It is safe for concurrent use by many goroutines and processes.
type Store struct {
	pool    *pgxpool.Pool
	opts    Options
	q       queries
	timeout string // Options.StatementTimeout, as lock_timeout and statement_timeout take it
	// pooled: the pool's connections start with timeouts no longer than the Store's
	// (poolTimeouts), so statements go alone, without setting them.
	pooled bool

	stop      chan struct{} // closed by Close: the pruner stops
	done      chan struct{} // closed when the pruner has stopped
	closeOnce sync.Once
}

// Open migrates opts.Schema (Migrate) and returns a Store on pool, which remains the
// caller's to close (after Close). Unless opts.PruneEvery is negative, the Store deletes
// expired rows every PruneEvery in the background until Close. It returns an error
// wrapping ErrInvalidOptions for a nil pool or ctx or bad opts, ErrNewerSchema for a schema from
// a newer pgstore, or the database's error.
func Open(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Store, error) {
	c, err := opts.resolved()
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, pool, &c); err != nil {
		return nil, err
	}
	pooled, err := poolTimeouts(ctx, pool, c.StatementTimeout)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read the pool's timeouts: %w", err)
	}
	s := &Store{pool: pool, opts: c, q: newQueries(pgx.Identifier{c.Schema}.Sanitize()),
		timeout: fmt.Sprintf("%dms", max(1, c.StatementTimeout.Milliseconds())), pooled: pooled,
		stop: make(chan struct{}), done: make(chan struct{})}
	if c.PruneEvery > 0 {
		go s.pruneLoop()
	} else {
		close(s.done)
	}
	return s, nil
}

// Ping checks that PostgreSQL answers within ctx, for a service's readiness probe (Open
// has checked it already, migrating the schema).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pgstore: PostgreSQL does not answer: %w", err)
	}
	return nil
}

// Close stops the background pruning and waits for a Prune in flight to end. It does not
// close the pool. The Store's methods still work after Close; only the pruning stops.
// Calling Close again does nothing.
func (s *Store) Close() {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
}

// maxClaimRounds bounds Claim's retries (see Claim); each is a lost race with another
// instance's claim and release, or an expired row deleted, so two or three are plenty.
const maxClaimRounds = 8

// Claim implements server.Store. It is one INSERT … ON CONFLICT (scope) DO NOTHING; if
// that makes no row, the key is taken (a SELECT reads the row it ran into), or the token
// was released before this claim arrived (refused). A row that has expired counts as
// absent: it is deleted and the claim made again.
func (s *Store) Claim(ctx context.Context, sc server.Scope, token, fingerprint string, lease, ttl time.Duration) (server.Claim, error) {
	if token == "" {
		return server.Claim{}, errors.New("pgstore: claim: empty token")
	}
	id := sc.ID()
	for range maxClaimRounds {
		made, err := s.exec(ctx, s.q.claim, id, fingerprint, micros(lease), micros(ttl), token)
		if err != nil {
			return server.Claim{}, fmt.Errorf("pgstore: claim: %w", err)
		}
		if made == 1 {
			return server.Claim{Claimed: true, Token: token}, nil
		}
		var r row
		again, err := s.taken(ctx, &r, id, token)
		if err != nil {
			return server.Claim{}, err
		}
		if again {
			continue
		}
		if r.inProgress && r.token.Valid && r.token.String == token {
			return server.Claim{Claimed: true, Token: token}, nil // a repeat whose reply was lost
		}
		if c, again, err := s.existing(ctx, id, &r); !again {
			return c, err
		}
	}
	return server.Claim{}, errNoStableClaim
}

// taken reads into r the row a claim under token ran into, having made none. If there is
// none, it returns server.ErrLeaseLost when token was released before the claim arrived (a
// repeat of a claim whose reply was lost, given up meanwhile), or again when the row went
// after the claim ran: claim again.
func (s *Store) taken(ctx context.Context, r *row, id, token string) (again bool, err error) {
	err = s.queryRow(ctx, r, s.q.find, id)
	if errors.Is(err, pgx.ErrNoRows) {
		var refused bool
		err = s.queryRow(ctx, scanFunc(func(r pgx.Row) error { return r.Scan(&refused) }), s.q.released, id, token)
		if err == nil && refused {
			return false, server.ErrLeaseLost
		}
		again = err == nil
	}
	if err != nil {
		return false, fmt.Errorf("pgstore: claim: %w", err)
	}
	return again, nil
}

// errNoStableClaim is returned when a claim meets concurrent changes maxClaimRounds times.
var errNoStableClaim = fmt.Errorf("pgstore: claim: no stable answer after %d rounds of concurrent changes", maxClaimRounds)

// existing answers a claim that ran into the record r. If r has expired, it deletes it and
// reports again: the claim goes round once more.
func (s *Store) existing(ctx context.Context, id string, r *row) (c server.Claim, again bool, err error) {
	if r.expiresIn <= 0 {
		if _, err := s.exec(ctx, s.q.dropExpired, id); err != nil {
			return server.Claim{}, false, fmt.Errorf("pgstore: claim: delete an expired record: %w", err)
		}
		return server.Claim{}, true, nil
	}
	rec, err := r.record()
	if err != nil {
		return server.Claim{}, false, err
	}
	return server.Claim{Record: rec}, false, nil
}

// row is what the find statement returns.
type row struct {
	token        pgtype.Text // pgtype's nullable types scan without a plan per row
	inProgress   bool
	fingerprint  string
	leaseLeft    int64 // µs
	expiresIn    int64 // µs
	status       pgtype.Int4
	header, body []byte
	unreplayable pgtype.Text
}

func (x *row) scan(r pgx.Row) error {
	return r.Scan(&x.token, &x.inProgress, &x.fingerprint, &x.leaseLeft, &x.expiresIn, &x.status, &x.header, &x.body, &x.unreplayable)
}

// record is r as server.Store reports a live record.
func (r row) record() (server.Record, error) {
	rec := server.Record{Fingerprint: r.fingerprint, ExpiresIn: time.Duration(r.expiresIn) * time.Microsecond}
	if r.inProgress {
		if !r.token.Valid {
			return server.Record{}, errors.New("pgstore: a record in progress without a token")
		}
		rec.State, rec.Token = server.StateInProgress, r.token.String
		rec.LeaseLeft = time.Duration(r.leaseLeft) * time.Microsecond
		return rec, nil
	}
	rec.State = server.StateDone
	if !r.status.Valid {
		return rec, nil // a done record without a response: the middleware answers 503
	}
	h, err := server.ParseHeader(r.header)
	if err != nil {
		return server.Record{}, err
	}
	resp := &server.Response{Status: int(r.status.Int32), Header: h, Body: r.body}
	if r.unreplayable.Valid {
		resp.Unreplayable = r.unreplayable.String
	}
	rec.Response = resp
	return rec, nil
}

// exec runs one statement on the pool under the Store's timeouts (Options.StatementTimeout):
// the connection's own when it carries them (pooled), otherwise set for the statement's
// implicit transaction alone, in the same round trip.
func (s *Store) exec(ctx context.Context, q string, args ...any) (int64, error) {
	if s.pooled {
		tag, err := s.pool.Exec(ctx, q, args...)
		return tag.RowsAffected(), err
	}
	b := &pgx.Batch{}
	b.Queue(s.q.timeouts, s.timeout)
	b.Queue(q, args...)
	br := s.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag.RowsAffected(), err
}

// rowScanner reads a statement's row; a *row is one, without a closure around it.
type rowScanner interface{ scan(pgx.Row) error }

// scanFunc is a function as a rowScanner.
type scanFunc func(pgx.Row) error

func (f scanFunc) scan(r pgx.Row) error { return f(r) }

// queryRow runs one query on the pool under the Store's timeouts, as exec does, and hands
// its row to dest.
func (s *Store) queryRow(ctx context.Context, dest rowScanner, q string, args ...any) error {
	if s.pooled {
		return dest.scan(s.pool.QueryRow(ctx, q, args...))
	}
	b := &pgx.Batch{}
	b.Queue(s.q.timeouts, s.timeout)
	b.Queue(q, args...)
	br := s.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = dest.scan(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// micros is d in whole microseconds, PostgreSQL's resolution.
func micros(d time.Duration) int64 { return d.Microseconds() }
