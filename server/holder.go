// holder.go is the middleware's side of a request's lease keeper (internal/lease): the
// renewal it makes, and what it does when the lease is lost or cannot be confirmed. It
// lives in the request's decision, so starting a keeper makes no closures.

package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/idem-go/idem/server/internal/lease"
)

// leaseConfig is the lease keepers' settings, the same for every request of c, with
// one timer they share until their first renewal.
func leaseConfig(c *config) lease.Config {
	return lease.Config{
		Lease:       c.Lease,
		Timeout:     c.StoreTimeout,
		Refused:     func(err error) bool { return errors.Is(err, ErrLeaseLost) },
		Lost:        ErrLeaseLost,
		Unconfirmed: ErrLeaseUnconfirmed,
		Clock:       lease.System,
		Shared:      lease.NewShared(lease.System), // most handlers end before their first renewal
	}
}

// holder is a lease.Holder for the handler of r, whose decision is d and whose context
// cancel ends.
type holder struct {
	m      *Middleware
	r      *http.Request
	d      *decision
	cancel context.CancelCauseFunc
}

// Renew renews the lease on the record the handler holds.
func (h *holder) Renew(ctx context.Context) error {
	c := h.m.cfg
	return c.Store.Renew(ctx, h.d.hold.Scope, h.d.hold.Token, c.Lease)
}

// Cancel cancels the handler's context with cause (ErrLeaseLost or ErrLeaseUnconfirmed).
func (h *holder) Cancel(cause error) {
	c := h.m.cfg
	if h.d.completed.Load() {
		// The handler completes the record in its own transaction, whose row lock keeps
		// other holders out (renewals wait on it too); a refusal is that completion, not
		// a loss.
		return
	}
	h.cancel(cause)
	if errors.Is(cause, ErrLeaseLost) {
		h.d.lost.Store(true)
		c.Logger.Warn("idempotency: lease lost while the handler runs; its context is cancelled and its answer will not be stored")
		c.Observer.LeaseLost(h.r)
		return
	}
	c.Logger.Warn("idempotency: the store did not confirm the lease in time; the handler's context is cancelled",
		"lease", c.Lease)
}

// Failed reports a renewal whose outcome is unknown.
func (h *holder) Failed(err error) {
	c := h.m.cfg
	c.Logger.Warn("idempotency: lease renewal got no answer; trying again", "err", err)
	c.Observer.StoreUncertain(h.r, "renew", err)
}
