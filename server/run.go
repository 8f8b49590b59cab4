// run.go runs the handler under a claim: a lease keeper (internal/lease) renews the lease
// while the handler runs and cancels the handler's context if the lease cannot be
// confirmed in time; when the handler ends, its outcome (outcome.go) decides whether the
// record is completed, released or handed to recovery, and settle makes that call.

package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/idem-go/idem/server/internal/lease"
)

// run runs next for r under cl and settles its record.
func (m *Middleware) run(next http.Handler, w http.ResponseWriter, r *http.Request, rq *request, cl claimed) {
	c := m.cfg
	rq.rec = recorder{w: w, limit: c.MaxResponseBytes}
	rec, d := &rq.rec, &rq.d
	d.hold = Hold{Scope: rq.scope, Token: cl.token}
	// The handler's context keeps the request's values but not its cancellation: a client
	// that goes away does not cut an effect short (its retry is answered with the outcome),
	// and the only cause the context ends with is the lease's, which a handler must heed.
	hctx, cancel := context.WithCancelCause(context.WithValue(rq.ctx, decisionKey{}, d))
	defer cancel(nil)
	r2 := r.WithContext(hctx)
	r2.Body = rq.bodyReader()
	r2.ContentLength, r2.TransferEncoding = int64(len(rq.body)), nil
	k := m.keep(r, rq, cl, d, cancel)
	began := time.Now()
	finished := false
	defer func() {
		k.Stop()
		m.durations.observe(r, time.Since(began))
		// A panic is let through to net/http (which logs it and drops the connection)
		// once the record is settled.
		resp := rec.response(c.unstored)
		if !finished && rec.status == 0 {
			resp.Status = http.StatusInternalServerError // what the panic means; net/http sends nothing
		}
		m.finish(r, rq, cl.token, resp, d, m.outcome(rec, d, !finished), !finished, k)
	}()
	next.ServeHTTP(rec, r2)
	finished = true
}

// keep starts the lease keeper of the handler running under cl: it renews the lease and
// cancels the handler's context with ErrLeaseLost or ErrLeaseUnconfirmed (holder.go).
func (m *Middleware) keep(r *http.Request, rq *request, cl claimed, d *decision, cancel context.CancelCauseFunc) *lease.Keeper {
	d.keeper = holder{m: m, r: r, d: d, cancel: cancel}
	return lease.KeepHolder(rq.ctx, &m.leaseConfig, &d.keeper, cl.sent)
}

// finish settles the record of a handler that ended with outcome o, its answer resp.
func (m *Middleware) finish(r *http.Request, rq *request, token string, resp *Response, d *decision, o Outcome, panicked bool, k *lease.Keeper) {
	c := m.cfg
	sc := rq.scope
	done := m.finishing.add(sc)
	until := rq.start.Add(c.TTL) // a repeat is of no use once the record may have expired
	// Each path makes the one call it needs.
	complete := func(resp *Response) func(context.Context) error {
		return func(ctx context.Context) error { return c.Store.Complete(ctx, sc, token, resp, c.TTL) }
	}
	release := func() func(context.Context) error {
		return func(ctx context.Context) error { return c.Store.Release(ctx, sc, token) }
	}
	switch {
	case d.completed.Load():
		// The handler's transaction completed the record, or rolled back: release it if
		// it is still ours, for then nothing happened.
		switch err := m.settle(rq.ctx, r, "release", until, release(), done); {
		case err == nil:
			c.Logger.Info("idempotency: the handler's transaction did not commit; the key is released")
		case errors.Is(err, ErrLeaseLost):
			c.Observer.Stored(r, len(resp.Body)) // done in the transaction, as expected
		}
	case o == OutcomeFinal:
		m.stored(r, d, m.settle(rq.ctx, r, "complete", until, complete(resp), done), len(resp.Body))
	case o == OutcomeNoEffect:
		m.lost(r, d, m.settle(rq.ctx, r, "release", until, release(), done))
	case c.Recover != nil:
		// Uncertain: give the lease up now, so that the next copy asks Recover at once
		// rather than a lease later. If this fails, the lease lapses on its own.
		c.Logger.Warn("idempotency: the handler's outcome is uncertain; the record is left to Recover",
			"status", resp.Status, "panicked", panicked)
		// In the background, once no renewal is in flight: one landing after this
		// would take the record back for a lease.
		go func() {
			defer done.settle()
			k.Idle()
			m.lost(r, d, m.call(rq.ctx, func(ctx context.Context) error { return c.Store.Renew(ctx, sc, token, 0) }))
		}()
	default:
		// Uncertain, and no Recover: the answer is stored, so that no retry runs the
		// effect again; a panic's is stored as not replayable, to be looked up.
		c.Logger.Warn("idempotency: the handler's outcome is uncertain; its answer is stored so that no retry runs it again",
			"status", resp.Status, "panicked", panicked)
		if panicked {
			resp = &Response{Status: resp.Status, Unreplayable: UnreplayablePanicked}
		}
		m.stored(r, d, m.settle(rq.ctx, r, "complete", until, complete(resp), done), len(resp.Body))
	}
}

// stored reports a completion's first attempt, err.
func (m *Middleware) stored(r *http.Request, d *decision, err error, bytes int) {
	if err == nil {
		m.cfg.Observer.Stored(r, bytes)
	}
	m.lost(r, d, err)
}

// lost reports err if it is ErrLeaseLost: another holder took the record over while the
// handler ran (its lease lapsed), so this handler's answer is not kept. A loss the lease
// keeper reported already is not reported again.
func (m *Middleware) lost(r *http.Request, d *decision, err error) {
	if errors.Is(err, ErrLeaseLost) {
		m.cfg.Logger.Warn("idempotency: lease lost: another holder has the record now; this handler's answer is not kept")
		if !d.lost.Load() {
			m.cfg.Observer.LeaseLost(r)
		}
	}
}

// settle makes a completion or release (call) of a record, f. The first attempt is
// bounded by StoreTimeout; if its outcome is unknown, f is repeated in the background
// until it lands, the Store refuses it, or until passes. done is called once it is
// resolved (settled). settle returns the first attempt's error.
func (m *Middleware) settle(ctx context.Context, r *http.Request, call string, until time.Time, f func(context.Context) error, done settling) error {
	c := m.cfg
	err := m.call(ctx, f)
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		c.Logger.Warn("idempotency: the store did not answer; repeating in the background", "call", call, "err", err)
		c.Observer.StoreUncertain(r, call, err)
		m.repeat(r, call, ResolvedLanded, until, f, done)
		return err
	}
	done.settle()
	return err
}

// call calls f bounded by StoreTimeout. ctx has the request's values but not its
// cancellation (request.ctx).
func (m *Middleware) call(ctx context.Context, f func(context.Context) error) error {
	return callWithin(ctx, m.cfg.StoreTimeout, f)
}
