// partition.go holds the scenarios that cut the link between an instance and its Store
// for real (a Store's own tests supply the link, e.g. a network namespace): replies lost
// after the Store acted (S38 over the network), and an instance cut off for longer than
// its lease while another one takes over (S39).

package servertest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/consumer"
)

// Link is a Store reached over a network link the scenarios cut: Replies loses the Store's
// replies (requests still arrive and are applied), Both silences both directions, Out
// drops what the instance sends; Heal undoes any of them.
type Link struct {
	Store              server.Store
	Replies, Both, Out func()
	Heal               func()
	// Healthy is a second Store on the same records, reached directly, as a second
	// instance of the service reaches them.
	Healthy server.Store
}

// NetConfig opens, for one subtest, a Store behind a Link.
type NetConfig struct {
	Open func(t testing.TB) Link
	// Lease is the lease the scenarios use; 0 means 1 s. It must be long enough for a
	// few round trips to the Store.
	Lease time.Duration
}

func (c *NetConfig) lease() time.Duration {
	if c.Lease > 0 {
		return c.Lease
	}
	return time.Second
}

// LostRepliesOverNetwork is S38 through a real cut: the Store's replies are lost while it
// applies a claim (and the claim's repeats), a completion, or a release; once the link
// heals, the next try runs the handler exactly once within about a lease, and the
// consumer's redelivery is processed.
func LostRepliesOverNetwork(t *testing.T, c NetConfig) {
	t.Helper()
	lease := c.lease()
	t.Run("Claim", func(t *testing.T) {
		t.Parallel()
		l := c.Open(t)
		var effects atomic.Int64
		s := newService(t, server.Options{Store: l.Store, Lease: lease}, paying(&effects))
		l.Replies()
		if got := s.post("k"); got.status != http.StatusServiceUnavailable || effects.Load() != 0 {
			t.Fatalf("try with the replies cut = %+v after %d effects, want 503 and none", got, effects.Load())
		}
		l.Heal()
		wantRunsOnce(t, s, lease, &effects)
	})
	t.Run("Complete", func(t *testing.T) {
		t.Parallel()
		l := c.Open(t)
		var effects atomic.Int64
		pay := paying(&effects)
		s := newService(t, server.Options{Store: l.Store, Lease: lease}, func(w http.ResponseWriter, r *http.Request) {
			l.Replies() // the completion will be applied, its reply lost
			pay(w, r)
		})
		first := s.post("k")
		if first.status != http.StatusCreated {
			t.Fatalf("first try = %+v", first)
		}
		l.Heal()
		var got answer
		within(t, lease, "the replay", func() bool { got = s.post("k"); return got.replayed })
		if got.body != first.body || effects.Load() != 1 {
			t.Errorf("replay %q after %d effects, want %q after one", got.body, effects.Load(), first.body)
		}
	})
	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		l := c.Open(t)
		var runs atomic.Int64
		s := newService(t, server.Options{Store: l.Store, Lease: lease}, func(w http.ResponseWriter, r *http.Request) {
			if runs.Add(1) == 1 {
				l.Replies() // the release will be applied, its reply lost
				server.DiscardResponse(r.Context())
				http.Error(w, "try later", http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})
		if got := s.post("k"); got.status != http.StatusServiceUnavailable {
			t.Fatalf("first try = %+v", got)
		}
		l.Heal()
		var got answer
		within(t, lease, "the handler runs again", func() bool { got = s.post("k"); return got.status == http.StatusCreated })
		if runs.Load() != 2 {
			t.Errorf("%d runs, want 2: the first said nothing happened", runs.Load())
		}
	})
	t.Run("ConsumerClaim", func(t *testing.T) {
		t.Parallel()
		l := c.Open(t)
		p := newProcessor(t, l.Store, lease)
		var effects atomic.Int64
		handle := func(context.Context) error { effects.Add(1); return nil }
		l.Replies()
		if _, err := p.Process(context.Background(), "q", "m", handle); err == nil {
			t.Fatal("Process with the replies cut succeeded")
		}
		l.Heal()
		if res := redeliver(t, p, lease, handle); res != consumer.Processed || effects.Load() != 1 {
			t.Errorf("redelivery = %v after %d effects, want processed once", res, effects.Load())
		}
	})
}

// wantRunsOnce polls the key until it is no longer in progress and checks that the
// handler ran once, then that a retry replays.
func wantRunsOnce(t *testing.T, s *service, lease time.Duration, effects *atomic.Int64) {
	t.Helper()
	var got answer
	within(t, lease, "the key runs again", func() bool {
		got = s.post("k")
		return got.status == http.StatusCreated || got.replayed
	})
	if again := s.post("k"); !again.replayed || effects.Load() != 1 {
		t.Errorf("retry = %+v after %d effects, want a replay of one", again, effects.Load())
	}
}

// Partition is S39: an instance running a handler is cut off from its Store (each of the
// Link's cuts in turn) for longer than its lease, while another instance, on the same
// records, takes the key or message over (a Recover hook answering "re-run", or
// RerunAbandoned). The cut-off handler's context is cancelled, with
// server.ErrLeaseUnconfirmed, before the other instance starts the same work, and the
// effect happens once. The handlers honour their context, as the contract asks.
func Partition(t *testing.T, c NetConfig) {
	t.Helper()
	perCut(t, c, []string{"Both", "Out", "Replies"}, partitionMiddleware, partitionConsumer)
}

// perCut runs middleware and consumer, each in a parallel subtest, under each of cuts (a
// Link's cut by name, see cutOf).
func perCut(t *testing.T, c NetConfig, cuts []string, middleware, consumer func(*testing.T, NetConfig, string)) {
	t.Helper()
	for _, cut := range cuts {
		t.Run("Middleware/"+cut, func(t *testing.T) {
			t.Parallel()
			middleware(t, c, cut)
		})
		t.Run("Consumer/"+cut, func(t *testing.T) {
			t.Parallel()
			consumer(t, c, cut)
		})
	}
}

// cutOf returns the cut named name.
func (l Link) cutOf(name string) func() {
	switch name {
	case "Both":
		return l.Both
	case "Out":
		return l.Out
	}
	return l.Replies
}

// work is a handler's long work, shared by the two instances: it stops when its context
// is cancelled, and makes its effect at the end only if it was not.
type work struct {
	mu        sync.Mutex
	effects   int
	cancelled time.Time // when the cut-off instance's context ended
	cause     error
	started   []time.Time // when each run began
}

// run works for d unless ctx ends first, and reports whether it made the effect.
func (wk *work) run(ctx context.Context, d time.Duration) bool {
	wk.mu.Lock()
	wk.started = append(wk.started, time.Now())
	wk.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		wk.mu.Lock()
		wk.cancelled, wk.cause = time.Now(), context.Cause(ctx)
		wk.mu.Unlock()
		return false
	case <-t.C:
	}
	wk.mu.Lock()
	defer wk.mu.Unlock()
	wk.effects++
	return true
}

// check fails t unless the first run was cancelled for an unconfirmed lease before the
// second began, and the effect happened once.
func (wk *work) check(t *testing.T) {
	t.Helper()
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if len(wk.started) != 2 || wk.effects != 1 {
		t.Fatalf("%d runs, %d effects; want 2 runs and one effect", len(wk.started), wk.effects)
	}
	if !errors.Is(wk.cause, server.ErrLeaseUnconfirmed) {
		t.Errorf("the cut-off handler's context ended with %v, want ErrLeaseUnconfirmed", wk.cause)
	}
	if wk.cancelled.IsZero() || !wk.cancelled.Before(wk.started[1]) {
		t.Errorf("the cut-off handler was cancelled at %v, the other instance started at %v: they overlapped",
			wk.cancelled, wk.started[1])
		return
	}
	t.Logf("the cut-off handler was cancelled %v after it started and %v before the other instance started",
		wk.cancelled.Sub(wk.started[0]).Round(time.Millisecond), wk.started[1].Sub(wk.cancelled).Round(time.Millisecond))
}

func partitionMiddleware(t *testing.T, c NetConfig, cut string) {
	lease := c.lease()
	l := c.Open(t)
	wk := &work{}
	handler := func(w http.ResponseWriter, r *http.Request) {
		if !wk.run(r.Context(), 4*lease) {
			server.DiscardResponse(r.Context()) // it knows it did nothing
			http.Error(w, "stopped", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}
	a := newService(t, server.Options{Store: l.Store, Lease: lease}, handler)
	rerun := func(context.Context, server.RecoverInfo) (server.Recovery, error) {
		return server.Recovery{Rerun: true}, nil
	}
	b := newService(t, server.Options{Store: l.Healthy, Lease: lease, Recover: rerun}, func(w http.ResponseWriter, r *http.Request) {
		wk.run(r.Context(), 0)
		w.WriteHeader(http.StatusCreated)
	})
	done := make(chan answer, 1)
	go func() { done <- a.post("k") }()
	within(t, lease, "the first handler starts", func() bool {
		wk.mu.Lock()
		defer wk.mu.Unlock()
		return len(wk.started) == 1
	})
	l.cutOf(cut)()
	var got answer
	within(t, 2*lease, "the other instance runs the key", func() bool {
		got = b.post("k")
		return got.status == http.StatusCreated
	})
	<-done
	l.Heal()
	wk.check(t)
	if again := b.post("k"); !again.replayed {
		t.Errorf("a retry after the heal = %+v, want the replay", again)
	}
}

func partitionConsumer(t *testing.T, c NetConfig, cut string) {
	lease := c.lease()
	l := c.Open(t)
	wk := &work{}
	a := newProcessor(t, l.Store, lease)
	b := startProcessor(t, &consumer.Options{Store: l.Healthy, Lease: lease, Group: t.Name(), RerunAbandoned: true})
	type result struct {
		res consumer.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := a.Process(context.Background(), "q", "m", func(ctx context.Context) error {
			if !wk.run(ctx, 4*lease) {
				return context.Cause(ctx)
			}
			return nil
		})
		done <- result{res, err}
	}()
	within(t, lease, "the first handler starts", func() bool {
		wk.mu.Lock()
		defer wk.mu.Unlock()
		return len(wk.started) == 1
	})
	l.cutOf(cut)()
	res := redeliver(t, b, 2*lease, func(ctx context.Context) error { wk.run(ctx, 0); return nil })
	if res != consumer.Processed {
		t.Errorf("the redelivery on the other consumer = %v, want processed", res)
	}
	<-done
	l.Heal()
	wk.check(t)
}
