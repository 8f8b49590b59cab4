// run.go runs the handler under a claim: it renews the lease while the handler runs (a
// heartbeat every Lease/3), records the answer, and then completes the record (fenced by
// the token) or releases it, per the store policy (policy.go).

package server

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"
)

// run runs next for r under token and stores or releases its answer.
func (m *Middleware) run(next http.Handler, w http.ResponseWriter, r *http.Request, rq *request, token string) {
	c := m.cfg
	rec := newRecorder(w, c.MaxResponseBytes)
	d := &decision{hold: Hold{Scope: rq.scope, Token: token}}
	r2 := r.WithContext(context.WithValue(r.Context(), decisionKey{}, d))
	r2.Body = rq.bodyReader()
	r2.ContentLength, r2.TransferEncoding = int64(len(rq.body)), nil
	hb := m.heartbeat(r, rq.scope, token, d)
	finished := false
	defer func() {
		lost := hb.stop()
		if !finished {
			// The handler panicked (net/http recovers and drops the connection): the effect
			// may have happened, so the record is left to lapse and be recovered, never
			// released to run again.
			c.Logger.Error("idempotency: handler panicked; the record is left stuck for recovery")
			return
		}
		m.finish(r, rq, token, rec, d, lost)
	}()
	next.ServeHTTP(rec, r2)
	finished = true
}

// finish completes or releases the record for the handler's answer in rec.
func (m *Middleware) finish(r *http.Request, rq *request, token string, rec *recorder, d *decision, lost bool) {
	c := m.cfg
	ctx := context.WithoutCancel(r.Context())
	resp := rec.response(c.unstored)
	var keep bool
	switch d.v.Load() {
	case decideStore:
		keep = true
	case decideDiscard:
		keep = false
	default:
		// An answer that was not kept has reached the client at least in part, so it is
		// never released: a retry would run the effect again.
		keep = resp.Unreplayable != "" || c.StoreStatus(resp.Status)
	}
	var err error
	if keep {
		err = c.Store.Complete(ctx, rq.scope, token, resp, c.TTL)
	} else {
		err = c.Store.Release(ctx, rq.scope, token)
	}
	switch {
	case errors.Is(err, ErrLeaseLost) && d.completed.Load():
		// The handler completed the record in its own transaction: expected.
		c.Observer.Stored(r, len(resp.Body))
	case errors.Is(err, ErrLeaseLost):
		c.Logger.Warn("idempotency: lease lost; the answer was not stored", "status", resp.Status)
		if !lost {
			c.Observer.LeaseLost(r)
		}
	case err != nil:
		m.completeFailed(r, err)
	case keep:
		c.Observer.Stored(r, len(resp.Body))
	}
}

// completeFailed logs a completion or release the Store could not make: the record stays
// in progress, its lease lapses, and it is recovered like a crashed holder's.
func (m *Middleware) completeFailed(r *http.Request, err error) {
	m.cfg.Logger.Error("idempotency: could not store the answer; the record will be stuck", "err", err)
	m.cfg.Observer.StoreError(r, err)
}

// heartbeat renews a lease until stopped.
type heartbeat struct {
	quit, done chan struct{}
	lost       atomic.Bool
}

// heartbeat starts renewing the lease of sc held by token every Lease/3. A renewal refused
// after the handler completed the record itself (d, MarkCompleted) is that completion,
// not a lost lease: the heartbeat just stops.
func (m *Middleware) heartbeat(r *http.Request, sc Scope, token string, d *decision) *heartbeat {
	c := m.cfg
	hb := &heartbeat{quit: make(chan struct{}), done: make(chan struct{})}
	ctx := context.WithoutCancel(r.Context())
	go func() {
		defer close(hb.done)
		t := time.NewTicker(max(c.Lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-hb.quit:
				return
			case <-t.C:
			}
			err := c.Store.Renew(ctx, sc, token, c.Lease)
			switch {
			case errors.Is(err, ErrLeaseLost) && d.completed.Load():
				return
			case errors.Is(err, ErrLeaseLost):
				hb.lost.Store(true)
				c.Logger.Warn("idempotency: lease lost while the handler runs; its answer will not be stored")
				c.Observer.LeaseLost(r)
				return
			case err != nil:
				c.Logger.Warn("idempotency: lease renewal failed; retrying", "err", err)
			}
		}
	}()
	return hb
}

// stop stops the heartbeat and reports whether it lost the lease.
func (hb *heartbeat) stop() bool {
	close(hb.quit)
	<-hb.done
	return hb.lost.Load()
}
