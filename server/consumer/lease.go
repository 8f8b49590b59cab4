// This file holds what a running handler's claim needs: the heartbeat that renews its
// lease, and the Hold its context carries for a done-mark inside the handler's own
// transaction.

package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/server"
)

type holdKey struct{}

// hold is the claim a handler runs under.
type hold struct {
	server.Hold
	marked atomic.Bool
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

// MarkCompleted tells Process that the handler marked its message done itself, so the
// refusal of Process's own mark is expected. It reports whether ctx is a handler's.
func MarkCompleted(ctx context.Context) bool {
	h, ok := ctx.Value(holdKey{}).(*hold)
	if ok {
		h.marked.Store(true)
	}
	return ok
}

// heartbeat renews the claim every Lease/3 until stop is called (when the handler has
// returned, or panicked), whether or not ctx has ended; if the claim is lost it cancels
// the handler's context with server.ErrLeaseLost.
func (p *Processor) heartbeat(ctx context.Context, sc server.Scope, token string, cancel context.CancelCauseFunc) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.o.Lease / 3)
		defer t.Stop()
		for {
			// Not stopped by ctx: a handler still running after its context ended (a
			// consumer shutting down) is still making its effect, and holds its claim
			// until it returns.
			select {
			case <-quit:
				return
			case <-t.C:
			}
			err := p.o.Store.Renew(context.WithoutCancel(ctx), sc, token, p.o.Lease)
			if errors.Is(err, server.ErrLeaseLost) {
				cancel(server.ErrLeaseLost)
				return
			}
			if err != nil {
				p.o.Logger.Warn("consumer: lease renewal failed; trying again", "queue", sc.Path, "err", err)
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(quit); wg.Wait() }) }
}
