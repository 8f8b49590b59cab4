package consumer_test

// shutdown_lease_test.go: a consumer shutting down cancels the context it passed to
// Process, but a handler that finishes its work anyway (or ignores its context, as many
// do) is still running its effect. Its claim must stay renewed until it returns, or
// another consumer finds it abandoned and runs the message again.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/consumer"
)

func TestHandlerFinishingAfterCancelKeepsItsClaim(t *testing.T) {
	store, clk := newLeaseClocks()
	const lease = 30 * time.Second
	stopping := clk.processor(t, consumer.Options{Store: store, Lease: lease})
	other := clk.processor(t, consumer.Options{Store: store, Lease: lease, Recover: decide(consumer.Rerun)})
	var runs atomic.Int32
	started, finish := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(bg)
	done := make(chan consumer.Result, 1)
	go func() {
		res, _ := stopping.Process(ctx, "q", "m-1", func(context.Context) error {
			close(started)
			<-finish // the effect takes its time, whatever the context says
			runs.Add(1)
			return nil
		})
		done <- res
	}()
	<-started
	cancel() // the consumer is shutting down
	for range 4 {
		clk.advance(lease / 3) // the handler is still at work, past its first lease
	}
	res, err := other.Process(bg, "q", "m-1", func(context.Context) error { runs.Add(1); return nil })
	close(finish)
	require.NoError(t, err)
	require.Equal(t, consumer.Busy, res, "a running handler's message was taken over")
	require.Equal(t, consumer.Processed, <-done)
	require.EqualValues(t, 1, runs.Load())
}

// A handler that panics stops renewing its claim (and leaves no goroutine): the claim
// lapses, and Recover decides about it as about a crashed consumer's.
func TestPanickingHandlerLetsItsClaimLapse(t *testing.T) {
	store, clk := newLeaseClocks()
	const lease = 30 * time.Second
	p := clk.processor(t, consumer.Options{Store: store, Lease: lease, Recover: decide(consumer.Rerun)})
	func() {
		defer func() { require.NotNil(t, recover()) }()
		_, _ = p.Process(bg, "q", "m-1", func(context.Context) error { panic("handler bug") })
	}()
	for range 6 {
		clk.advance(lease / 3) // two leases: a keeper left running would renew it
	}
	res, err := p.Process(bg, "q", "m-1", func(context.Context) error { return nil })
	require.NoError(t, err)
	require.Equal(t, consumer.Processed, res, "the panicked handler's claim was still renewed")
}

// A handler still working after its context ended (a shutdown) learns that its claim was
// lost from LeaseErr, which its context's cause, context.Canceled, cannot tell.
func TestLeaseErrAfterShutdown(t *testing.T) {
	store, clk := newLeaseClocks()
	p := clk.processor(t, consumer.Options{Store: lossyStore{store}, Lease: lossyLease})
	ctx, stop := context.WithCancel(bg)
	res, err := p.Process(ctx, "q", "m-1", func(hctx context.Context) error {
		stop() // the consumer shuts down; the handler goes on with its work
		require.ErrorIs(t, context.Cause(hctx), context.Canceled)
		require.NoError(t, consumer.LeaseErr(hctx), "lost before the first renewal")
		clk.advance(lossyLease / 3) // the first renewal: the lease is gone
		require.ErrorIs(t, consumer.LeaseErr(hctx), server.ErrLeaseLost)
		require.ErrorIs(t, context.Cause(hctx), context.Canceled, "the context's cause stays the shutdown's")
		return consumer.LeaseErr(hctx) // so it makes no effect
	})
	require.ErrorIs(t, err, server.ErrLeaseLost)
	require.Equal(t, consumer.Failed, res)
	require.NoError(t, consumer.LeaseErr(bg), "outside a handler")
}
