// This file holds what a running handler's claim needs: the lease keeper that renews it
// (internal/lease), and the Hold its context carries for a done-mark inside the handler's own
// transaction.

package consumer

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/internal/lease"
)

type holdKey struct{}

// hold is the claim a handler runs under.
type hold struct {
	server.Hold
	marked atomic.Bool
	lost   atomic.Pointer[error] // why the claim can no longer be relied on, once it cannot
}

// HoldFrom returns the claim the handler whose context is ctx runs under, for a Store that
// marks the message done inside the handler's own transaction (the PostgreSQL store's
// CompleteTx); the handler then calls MarkCompleted. false outside a handler.
func HoldFrom(ctx context.Context) (server.Hold, bool) {
	h, ok := ctx.Value(holdKey{}).(*hold)
	if !ok {
		return server.Hold{}, false
	}
	return h.Hold, true
}

// LeaseErr returns server.ErrLeaseLost or server.ErrLeaseUnconfirmed once the claim of the
// handler whose context is ctx can no longer be relied on, and nil before (or outside a
// handler). The handler's context is cancelled with that cause too, unless it had ended
// already, as it has during a shutdown (the context Process was given ended): a handler
// that finishes its work after its context ended checks LeaseErr before each effect.
func LeaseErr(ctx context.Context) error {
	h, ok := ctx.Value(holdKey{}).(*hold)
	if !ok {
		return nil
	}
	if err := h.lost.Load(); err != nil {
		return *err
	}
	return nil
}

// MarkCompleted tells Process that the handler marked its message done itself, so the
// refusal of Process's own mark is expected. It reports whether ctx is a handler's.
func MarkCompleted(ctx context.Context) bool {
	h, ok := ctx.Value(holdKey{}).(*hold)
	if ok {
		h.marked.Store(true)
	}
	return ok
}

// keep starts the lease keeper of a handler running under token (its lease confirmed at
// sent): it renews the claim every Lease/3 until stopped, whether or not ctx has ended (a
// handler still running after its context ended, a consumer shutting down, is still
// making its effect), and cancels the handler's context with server.ErrLeaseLost if the
// claim is lost, or server.ErrLeaseUnconfirmed if the Store does not confirm it in time.
func (p *Processor) keep(ctx context.Context, sc server.Scope, token string, sent time.Time, h *hold, cancel context.CancelCauseFunc) *lease.Keeper {
	return lease.Keep(ctx, lease.Config{
		Lease:   p.o.Lease,
		Timeout: p.o.StoreTimeout,
		Renew:   func(ctx context.Context) error { return p.o.Store.Renew(ctx, sc, token, p.o.Lease) },
		Refused: func(err error) bool { return errors.Is(err, server.ErrLeaseLost) },
		Cancel: func(cause error) {
			if h.marked.Load() {
				// The handler marks the message done in its own transaction, whose row
				// lock keeps other consumers out; a refusal is that mark, not a loss.
				return
			}
			p.o.Logger.Warn("consumer: the handler's context is cancelled", "queue", sc.Path, "cause", cause)
			h.lost.Store(&cause)
			cancel(cause)
		},
		Lost:        server.ErrLeaseLost,
		Unconfirmed: server.ErrLeaseUnconfirmed,
		Failed: func(err error) {
			p.o.Logger.Warn("consumer: lease renewal got no answer; trying again", "queue", sc.Path, "err", err)
		},
		Clock: p.clock,
	}, sent)
}
