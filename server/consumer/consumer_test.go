package consumer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/consumer"
	"github.com/idem-go/idem/server/internal/lease/leasetest"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/servertest"
	"github.com/stretchr/testify/require"
)

func newStore() (*memstore.Store, *servertest.Clock) {
	clk := servertest.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	return memstore.New(&memstore.Options{Now: clk.Now}), clk
}

// clocks is the time of a test's leases: its memstore's clock, and the claims' (their send
// times and keepers). Neither moves unless the test advances them.
type clocks struct {
	store *servertest.Clock
	lease *leasetest.ManualClock
}

// newLeaseClocks returns a memstore on a clock of its own, and the clocks. The claims'
// starts at the real time, as the release of a claim whose reply was lost is repeated
// until its send time + TTL on the real clock.
func newLeaseClocks() (*memstore.Store, *clocks) {
	store, clk := newStore()
	return store, &clocks{store: clk, lease: leasetest.NewManualClock(time.Now())}
}

// processor is newProcessor, its claims on c's lease clock.
func (c *clocks) processor(t *testing.T, opts consumer.Options) *consumer.Processor {
	p := newProcessor(t, opts)
	consumer.SetLeaseClock(p, c.lease)
	return p
}

// advance moves the store's clock and the claims' by d, and returns once the renewals that
// brought due are made.
func (c *clocks) advance(d time.Duration) {
	c.store.Advance(d)
	c.lease.Advance(d)
	c.lease.Wait()
}

// newProcessor builds a Processor; the test then checks it leaves no goroutine behind.
func newProcessor(t *testing.T, opts consumer.Options) *consumer.Processor {
	t.Helper()
	leakcheck.Check(t)
	p, err := consumer.New(&opts)
	require.NoError(t, err)
	t.Cleanup(func() { shutdown(p.Shutdown) })
	return p
}

// shutdown gives what is still repeated in the background a moment to land, then gives it
// up: a test's Store may be down for good.
func shutdown(f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = f(ctx)
}

var bg = context.Background()

// A redelivered message is acked without running again; another group runs it once too.
func TestProcessOncePerGroup(t *testing.T) {
	store, _ := newStore()
	a := newProcessor(t, consumer.Options{Store: store, Group: "billing"})
	b := newProcessor(t, consumer.Options{Store: store, Group: "billing"})
	other := newProcessor(t, consumer.Options{Store: store, Group: "audit"})
	var runs atomic.Int32
	handle := func(context.Context) error { runs.Add(1); return nil }

	res, err := a.Process(bg, "payments", "m-1", handle)
	require.NoError(t, err)
	require.Equal(t, consumer.Processed, res)
	res, err = b.Process(bg, "payments", "m-1", handle)
	require.NoError(t, err)
	require.Equal(t, consumer.Duplicate, res)
	require.EqualValues(t, 1, runs.Load())

	res, err = other.Process(bg, "payments", "m-1", handle)
	require.NoError(t, err)
	require.Equal(t, consumer.Processed, res, "another group processes the message too")
	res, err = a.Process(bg, "refunds", "m-1", handle)
	require.NoError(t, err)
	require.Equal(t, consumer.Processed, res, "the same ID on another queue is another message")
	require.EqualValues(t, 3, runs.Load())
}

// Concurrent deliveries of one message run the handler once; the others are Busy (still
// running) or Duplicate (done).
func TestConcurrentDeliveriesRunOnce(t *testing.T) {
	store, _ := newStore()
	p := newProcessor(t, consumer.Options{Store: store})
	var runs atomic.Int32
	release := make(chan struct{})
	results := make(chan consumer.Result, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res, err := p.Process(bg, "q", "m-1", func(context.Context) error {
				runs.Add(1)
				<-release
				return nil
			})
			require.NoError(t, err)
			results <- res
		})
	}
	for range 7 { // everyone but the runner has answered
		require.Equal(t, consumer.Busy, <-results)
	}
	close(release)
	wg.Wait()
	require.Equal(t, consumer.Processed, <-results)
	require.EqualValues(t, 1, runs.Load())
}

// S36's second half: a handler that fails releases the message, so the redelivery runs
// it; a deduplicator that marked it first would have lost it.
func TestFailureReleasesForRedelivery(t *testing.T) {
	store, _ := newStore()
	p := newProcessor(t, consumer.Options{Store: store})
	boom := errors.New("downstream unavailable")
	var effects atomic.Int32
	res, err := p.Process(bg, "q", "m-1", func(context.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, consumer.Failed, res)

	res, err = p.Process(bg, "q", "m-1", func(context.Context) error { effects.Add(1); return nil })
	require.NoError(t, err)
	require.Equal(t, consumer.Processed, res, "the redelivery runs")
	require.EqualValues(t, 1, effects.Load())
}

// abandon leaves a claim on m-1 as a consumer killed mid-handler would, and lets its
// lease lapse.
func abandon(t *testing.T, store *memstore.Store, clk *servertest.Clock, group string) {
	t.Helper()
	sc := server.Scope{Identity: group, Method: "MESSAGE", Path: "q", Key: "m-1"}
	c, err := store.Claim(bg, sc, server.NewToken(), "", time.Second, time.Hour)
	require.NoError(t, err)
	require.True(t, c.Claimed)
	clk.Advance(2 * time.Second)
}

// A message whose consumer died running it is never run again blindly: Busy without
// Recover; Recover decides Done (marked, not run) or Rerun; RerunAbandoned reruns.
func TestAbandonedMessage(t *testing.T) {
	ran := func(p *consumer.Processor) (consumer.Result, bool) {
		var runs atomic.Int32
		res, err := p.Process(bg, "q", "m-1", func(context.Context) error { runs.Add(1); return nil })
		require.NoError(t, err)
		return res, runs.Load() == 1
	}
	t.Run("no rule", func(t *testing.T) {
		store, clk := newStore()
		abandon(t, store, clk, "")
		res, run := ran(newProcessor(t, consumer.Options{Store: store}))
		require.Equal(t, consumer.Busy, res)
		require.False(t, run)
	})
	t.Run("still leased", func(t *testing.T) {
		store, _ := newStore()
		sc := server.Scope{Method: "MESSAGE", Path: "q", Key: "m-1"}
		_, err := store.Claim(bg, sc, server.NewToken(), "", time.Minute, time.Hour)
		require.NoError(t, err)
		res, run := ran(newProcessor(t, consumer.Options{Store: store, RerunAbandoned: true}))
		require.Equal(t, consumer.Busy, res, "a live holder is never taken over")
		require.False(t, run)
	})
	for _, c := range []struct {
		name    string
		opts    consumer.Options
		want    consumer.Result
		wantRun bool
	}{
		{"recover done", consumer.Options{Recover: decide(consumer.Done)}, consumer.Duplicate, false},
		{"recover rerun", consumer.Options{Recover: decide(consumer.Rerun)}, consumer.Processed, true},
		{"recover undecided", consumer.Options{Recover: decide(consumer.Undecided)}, consumer.Busy, false},
		{"recover fails", consumer.Options{Recover: func(context.Context, consumer.Message) (consumer.Decision, error) {
			return consumer.Done, errors.New("ledger down")
		}}, consumer.Busy, false},
		{"rerun abandoned", consumer.Options{RerunAbandoned: true}, consumer.Processed, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, clk := newStore()
			abandon(t, store, clk, "")
			c.opts.Store = store
			p := newProcessor(t, c.opts)
			res, run := ran(p)
			require.Equal(t, c.want, res)
			require.Equal(t, c.wantRun, run)
			if c.want != consumer.Busy {
				res, run = ran(p)
				require.Equal(t, consumer.Duplicate, res, "then the message is done")
				require.False(t, run)
			}
		})
	}
}

func decide(d consumer.Decision) func(context.Context, consumer.Message) (consumer.Decision, error) {
	return func(_ context.Context, m consumer.Message) (consumer.Decision, error) {
		if m.Queue != "q" || m.ID != "m-1" {
			return consumer.Undecided, errors.New("wrong message")
		}
		return d, nil
	}
}

// A handler that marks its message done itself (in its own transaction, with the Hold)
// gets Processed and no error.
func TestMarkCompletedInTheHandler(t *testing.T) {
	store, _ := newStore()
	p := newProcessor(t, consumer.Options{Store: store})
	_, ok := consumer.HoldFrom(bg)
	require.False(t, ok)
	require.False(t, consumer.MarkCompleted(bg))
	res, err := p.Process(bg, "q", "m-1", func(ctx context.Context) error {
		h, ok := consumer.HoldFrom(ctx)
		require.True(t, ok)
		require.Equal(t, "m-1", h.Scope.Key)
		require.NoError(t, store.Complete(ctx, h.Scope, h.Token, &server.Response{Status: 200}, time.Hour))
		require.True(t, consumer.MarkCompleted(ctx))
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, consumer.Processed, res)
	res, err = p.Process(bg, "q", "m-1", func(context.Context) error { t.Error("ran twice"); return nil })
	require.NoError(t, err)
	require.Equal(t, consumer.Duplicate, res)
}

// lossyLease is the lease of the tests that use lossyStore.
const lossyLease = 30 * time.Second

// lossyStore loses every lease at its first renewal.
type lossyStore struct{ *memstore.Store }

func (lossyStore) Renew(context.Context, server.Scope, string, time.Duration) error {
	return server.ErrLeaseLost
}

// A handler whose claim is lost sees its context canceled with ErrLeaseLost.
func TestLostLeaseCancelsTheHandler(t *testing.T) {
	store, clk := newLeaseClocks()
	p := clk.processor(t, consumer.Options{Store: lossyStore{store}, Lease: lossyLease})
	res, err := p.Process(bg, "q", "m-1", func(ctx context.Context) error {
		require.NoError(t, ctx.Err())
		clk.advance(lossyLease / 3) // the first renewal
		require.Error(t, ctx.Err(), "the lease loss was not noticed")
		return context.Cause(ctx)
	})
	require.ErrorIs(t, err, server.ErrLeaseLost)
	require.Equal(t, consumer.Failed, res)
}

// downStore cannot answer.
type downStore struct{ server.Store }

var errDown = errors.New("connection refused")

func (downStore) Claim(context.Context, server.Scope, string, string, time.Duration, time.Duration) (server.Claim, error) {
	return server.Claim{}, errDown
}

// Bad input and a store outage: an error, the handler not run, nothing stored.
func TestBadInputAndOutage(t *testing.T) {
	_, err := consumer.New(&consumer.Options{})
	require.ErrorIs(t, err, consumer.ErrNoStore)
	_, err = consumer.New(nil) // nil means the defaults, and a Store has none
	require.ErrorIs(t, err, consumer.ErrNoStore)
	store, _ := newStore()
	for _, lease := range []time.Duration{-time.Second, time.Millisecond} {
		_, err = consumer.New(&consumer.Options{Store: store, Lease: lease})
		require.ErrorIs(t, err, consumer.ErrInvalidOptions)
	}
	for _, o := range []consumer.Options{
		{Store: store, Lease: time.Hour, TTL: time.Minute},                       // done marks gone before a lease
		{Store: store, Lease: time.Second, StoreTimeout: 500 * time.Millisecond}, // more than a quarter lease
	} {
		_, err = consumer.New(&o)
		require.ErrorIs(t, err, consumer.ErrInvalidOptions)
	}
	p := newProcessor(t, consumer.Options{Store: store})
	never := func(context.Context) error { t.Error("handler ran"); return nil }
	for _, m := range [][2]string{{"", "m"}, {"q", ""}, {"q", string(make([]byte, 1025))}} {
		_, err := p.Process(bg, m[0], m[1], never)
		require.ErrorIs(t, err, consumer.ErrInvalidMessage)
	}
	require.Zero(t, store.Len())

	down := newProcessor(t, consumer.Options{Store: downStore{store}})
	res, err := down.Process(bg, "q", "m-1", never)
	require.ErrorIs(t, err, errDown)
	require.Zero(t, res)
}
