// onecommit.go is the Store side of the one-commit path: OneCommit, a server.Store whose
// Claim begins a transaction and inserts the claim row in it, held open while the handler
// runs; onecommit_handler.go runs the handler in that transaction and commits the stored
// answer with it.

package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idem-go/idem/server"
)

// OneCommit is a server.Store on the Store's table that makes a request's claim, its
// handler's effects and its stored answer one commit, for services whose effects are in
// the same database. Use it as the middleware's Store and wrap each handler with Wrap:
//
//	oc := store.OneCommit()
//	mw, err := server.New(&server.Options{Store: oc, Identity: accountOf})
//	http.Handle("POST /payments", mw.Wrap(oc.Wrap(payments))) // payments uses pgstore.TxFrom
//
// Its Claim begins a transaction on the pool and inserts the claim row in it, without
// committing: a concurrent copy's Claim, in its own transaction, waits on the row's
// unique index until that transaction ends, at most Options.StatementTimeout (or three
// quarters of what its context has left, if less), then answers as the committed row says
// (a replay, or 422 for another fingerprint), claims the key (the first rolled back), or
// reports the record in progress (409 with Retry-After). The transaction holds one pooled
// connection from the claim to the commit.
//
// A record that a OneCommit holds is never seen in progress by anyone else, so nothing can
// take it over, and a process killed before the commit leaves nothing behind: PostgreSQL
// rolls the transaction back and the key is free, with no Recover needed. The rows it
// commits are the Store's, so a Store and its OneCommit share records, and a route may
// move from one path to the other.
//
// A handler the middleware runs under a OneCommit claim without Wrap cannot reach the
// transaction: the middleware's Complete then writes the answer in it and commits, after
// the answer has reached the client (the two-commit path's guarantees, one commit fewer).
//
// It is safe for concurrent use.
type OneCommit struct {
	s  *Store
	mu sync.Mutex
	tx map[string]*held // by token
}

// held is a claim's transaction and what became of it.
type held struct {
	tx    pgx.Tx
	state txState // under OneCommit.mu
}

type txState int

const (
	txNone       txState = iota // no such claim here
	txOpen                      // the claim made, not committed
	txCommitted                 // the record committed done (or, by Renew with 0, stuck)
	txRolledBack                // nothing happened: the key is free
	txUnknown                   // a commit sent without an answer: the table tells
)

// OneCommit returns the one-commit Store on s's table and pool (see OneCommit). Each call
// returns a new one; a handler must be wrapped by the one the middleware claims with.
func (s *Store) OneCommit() *OneCommit {
	return &OneCommit{s: s, tx: map[string]*held{}}
}

// Claim implements server.Store: it begins a transaction and inserts the claim row in it
// (see OneCommit). If the key is taken, the transaction is rolled back and the record
// returned, as Store.Claim returns it; a wait on a transaction that does not end within
// the lock timeout returns the record in progress, with a lease of lease left.
func (o *OneCommit) Claim(ctx context.Context, sc server.Scope, token, fingerprint string, lease, ttl time.Duration) (server.Claim, error) {
	if token == "" {
		return server.Claim{}, errors.New("pgstore: claim: empty token")
	}
	id := sc.ID()
	for range maxClaimRounds {
		tx, err := o.begin(ctx, id, token, fingerprint, lease, ttl)
		var pgErr *pgconn.PgError
		var r row
		switch {
		case err == nil && tx != nil:
			o.mu.Lock()
			o.tx[token] = &held{tx: tx, state: txOpen}
			o.mu.Unlock()
			return server.Claim{Claimed: true, Token: token}, nil
		case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available
			// Another transaction holds the key, uncommitted: its handler runs.
			return server.Claim{Record: server.Record{State: server.StateInProgress, Fingerprint: fingerprint,
				LeaseLeft: lease, ExpiresIn: max(lease, ttl)}}, nil
		case err == nil: // the key is taken: read the row that won
			again, err := o.s.taken(ctx, &r, id, token)
			if err != nil {
				return server.Claim{}, err
			}
			if again {
				continue
			}
		default:
			return server.Claim{}, fmt.Errorf("pgstore: claim: %w", err)
		}
		if c, again, err := o.s.existing(ctx, id, &r); !again {
			return c, err
		}
	}
	return server.Claim{}, errNoStableClaim
}

// begin begins a transaction and runs the claim statement in it, under a lock timeout
// that it then sets back for the handler's statements (one round trip after BEGIN). It
// returns the open transaction if the claim was made; otherwise (nil) it has rolled it
// back.
func (o *OneCommit) begin(ctx context.Context, id, token, fingerprint string, lease, ttl time.Duration) (pgx.Tx, error) {
	tx, err := o.s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	wait := o.s.opts.StatementTimeout
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d)*3/4)
	}
	// The lock timeout ends a wait on a concurrent copy's transaction (see Claim); the
	// statement timeout, twice as long, a slow database.
	ms := max(1, wait.Milliseconds())
	b := &pgx.Batch{}
	b.Queue(o.s.q.stashTimeouts, fmt.Sprintf("%dms", ms), fmt.Sprintf("%dms", 2*ms))
	b.Queue(o.s.q.claim, id, fingerprint, micros(lease), micros(ttl), token)
	b.Queue(o.s.q.restoreTimeouts)
	br := tx.SendBatch(ctx, b)
	_, err = br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || tag.RowsAffected() != 1 {
		o.rollback(ctx, tx)
		return nil, err
	}
	return tx, nil
}

// rollback rolls tx back, even when ctx has ended; if it cannot, pgx closes the
// connection, which rolls it back too.
func (o *OneCommit) rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.s.opts.StatementTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// state returns token's transaction and its state, or nil and txNone.
func (o *OneCommit) state(token string) (*held, txState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.tx[token]
	if h == nil {
		return nil, txNone
	}
	return h, h.state
}

// end records what became of h.
func (o *OneCommit) end(h *held, st txState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h.state = st
}

// commit runs f in h's transaction and commits it, recording the outcome: committed,
// rolled back (f failed: nothing happened), or unknown (the commit got no answer).
func (o *OneCommit) commit(ctx context.Context, token string, h *held, f func(db) error) error {
	if err := f(inTx(ctx, h.tx)); err != nil {
		o.rollback(ctx, h.tx)
		o.end(h, txRolledBack)
		return err
	}
	if err := h.tx.Commit(ctx); err != nil {
		o.end(h, txUnknown)
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	o.end(h, txCommitted)
	return nil
}

// Renew implements server.Store. While the claim's transaction is open its row lock is
// the lease: Renew returns nil at once. A lease of 0 (the middleware hands an uncertain
// record to Recover) commits the record in progress with its lease ended.
func (o *OneCommit) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	switch h, st := o.state(token); {
	case st == txNone || st == txUnknown:
		return o.s.Renew(ctx, sc, token, lease)
	case st != txOpen:
		return server.ErrLeaseLost // done, or rolled back
	case lease > 0:
		return nil
	default:
		err := o.commit(ctx, token, h, func(db db) error {
			return fenced("renew")(db.exec(o.s.q.renew, sc.ID(), token, micros(lease)))
		})
		o.forget(token, h)
		return err
	}
}

// Complete implements server.Store: in the claim's transaction, the record is completed
// and committed. Repeated after its commit got no answer, it asks the table.
func (o *OneCommit) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	switch h, st := o.state(token); {
	case st == txNone || st == txUnknown:
		return o.s.Complete(ctx, sc, token, resp, ttl)
	case st == txCommitted:
		return nil // a repeat
	case st == txRolledBack:
		return server.ErrLeaseLost
	default:
		return o.commit(ctx, token, h, func(db db) error { return o.s.complete(db, sc, token, resp, ttl) })
	}
}

// Release implements server.Store: an open transaction is rolled back, so nothing the
// handler did in it happened and the key is free. A claim of a OneCommit never lands
// without a commit, so a token it does not know needs no remembering (see
// server.Store.Release). It returns server.ErrLeaseLost for a record committed done.
func (o *OneCommit) Release(ctx context.Context, sc server.Scope, token string) error {
	h, st := o.state(token)
	switch st {
	case txNone:
		return nil
	case txOpen:
		o.rollback(ctx, h.tx)
		o.end(h, txRolledBack)
		o.forget(token, h)
		return nil
	case txRolledBack:
		o.forget(token, h)
		return nil
	case txCommitted:
		o.forget(token, h)
		return server.ErrLeaseLost
	}
	err := o.s.Release(ctx, sc, token) // unknown: the table tells
	if err == nil || errors.Is(err, server.ErrLeaseLost) {
		o.forget(token, h)
	}
	return err
}

// TakeOver implements server.Store: a OneCommit's own records are never seen in progress,
// so this only takes over records in progress that a Store committed.
func (o *OneCommit) TakeOver(ctx context.Context, sc server.Scope, stale, token string, lease time.Duration) error {
	return o.s.TakeOver(ctx, sc, stale, token, lease)
}

// forget drops h, the record of token, once the middleware is done with it.
func (o *OneCommit) forget(token string, h *held) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tx[token] == h {
		delete(o.tx, token)
	}
}
