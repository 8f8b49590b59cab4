// oneway.go holds S42, a one-way partition between an instance and its Store that lasts
// longer than the lease and then heals: what happens after the heal, once the instance's
// late calls (applied but unanswered, or held back) meet another instance's work. S38 and
// S39 (partition.go) check the cut itself; this checks that nothing is done twice and
// nothing is left in progress afterwards.

package servertest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/consumer"
	"github.com/idem-go/idem/server/internal/servicetest"
)

// OneWay is S42: an instance whose Store link is cut one way (its requests arrive and are
// applied but their replies are lost, or its requests are dropped) for three leases,
// while another instance on the same records takes its work over: a key (or message)
// whose handler was running when the link was cut, and one that arrived during the cut.
// After the heal, each key and message has had its effect once; both instances answer it
// as done (the stored response, or Duplicate) within about a lease, never in progress;
// and every Store call the cut-off instance was repeating in the background has resolved.
// The handlers honour their context, as the contract asks.
func OneWay(t *testing.T, c NetConfig) {
	t.Helper()
	perCut(t, c, []string{"Replies", "Out"}, oneWayMiddleware, oneWayConsumer)
}

// oneWayCut is how long the scenarios keep the link cut, in leases: long enough for the
// cut-off instance's lease to run out and the other instance to take over.
const oneWayCut = 3

// effects counts each key's (or message's) effects.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *effects) add(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[key]++
}

// wantOnce fails t unless each of keys had exactly one effect.
func (e *effects) wantOnce(t *testing.T, keys ...string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range keys {
		if e.n[k] != 1 {
			t.Errorf("%s had %d effects, want one", k, e.n[k])
		}
	}
}

// holdCut waits until the link has been cut for oneWayCut leases since cutAt, then heals it.
func holdCut(l Link, cutAt time.Time, lease time.Duration) {
	time.Sleep(time.Until(cutAt.Add(oneWayCut * lease)))
	l.Heal()
}

// resolved fails t unless what (a Middleware's or a Processor's Shutdown) returns within
// three leases: every call repeated in the background has landed or been refused. It
// returns how long that took.
func resolved(t *testing.T, lease time.Duration, what string, shutdown func(context.Context) error) time.Duration {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*lease)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Errorf("%s: background Store calls still unresolved three leases after the heal: %v", what, err)
	}
	return time.Since(began).Round(time.Millisecond)
}

// since is how long ago t was, rounded for a log line.
func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

func oneWayMiddleware(t *testing.T, c NetConfig, cut string) {
	lease := c.lease()
	l := c.Open(t)
	var done effects
	started := make(chan struct{}, 1)
	// A's handler works for four leases unless its context ends first; it says so when
	// it stops without its effect, which frees the key.
	obs := &servicetest.Observer{}
	a := newService(t, server.Options{Store: l.Store, Lease: lease, Observer: obs}, func(w http.ResponseWriter, r *http.Request) {
		signal(started)
		select {
		case <-r.Context().Done():
			server.DiscardResponse(r.Context())
			http.Error(w, "stopped", http.StatusServiceUnavailable)
			return
		case <-time.After(4 * lease):
		}
		done.add(r.Header.Get("Idempotency-Key"))
		w.WriteHeader(http.StatusCreated)
	})
	rerun := func(context.Context, server.RecoverInfo) (server.Recovery, error) {
		return server.Recovery{Rerun: true}, nil
	}
	b := newService(t, server.Options{Store: l.Healthy, Lease: lease, Recover: rerun}, func(w http.ResponseWriter, r *http.Request) {
		done.add(r.Header.Get("Idempotency-Key"))
		w.WriteHeader(http.StatusCreated)
	})

	first := make(chan answer, 1)
	go func() { first <- a.post("running") }()
	select {
	case <-started:
	case got := <-first:
		t.Fatalf("the first request ended before its handler started: %+v", got)
	case <-time.After(3 * lease):
		t.Fatal("the first handler did not start within three leases")
	}
	l.cutOf(cut)()
	cutAt := time.Now()
	if got := a.post("arrived"); got.status != http.StatusServiceUnavailable {
		t.Errorf("a key sent to the cut-off instance = %+v, want 503", got)
	}
	took, held := map[string]time.Duration{}, map[string]int{}
	for _, k := range []string{"running", "arrived"} {
		within(t, lease, "the other instance runs "+k, func() bool {
			got := b.post(k)
			if got.status == http.StatusConflict {
				held[k]++ // the cut-off instance's claim is in the Store: it arrived
			}
			return got.status == http.StatusCreated
		})
		took[k] = since(cutAt)
	}
	if got := <-first; got.status == http.StatusCreated {
		t.Errorf("the cut-off handler answered %+v: it ran on without a confirmed lease", got)
	}
	holdCut(l, cutAt, lease)
	// The cut-off instance's late calls first, then what the keys answer: a late call
	// that undid the other instance's work would show there.
	late := resolved(t, lease, "the healed instance", a.mw.Shutdown)

	for _, k := range []string{"running", "arrived"} {
		for name, s := range map[string]*service{"the healed instance": a, "the other instance": b} {
			var got answer
			within(t, lease, name+" answers "+k+" as done", func() bool { got = s.post(k); return got.status != http.StatusConflict })
			if !got.replayed || got.status != http.StatusCreated {
				t.Errorf("%s answers %s with %+v after the heal, want the stored 201 replayed", name, k, got)
			}
		}
	}
	done.wantOnce(t, "running", "arrived")
	t.Logf("cut %s: the other instance ran the running key %v and the arrived key %v after the cut (found held %d and %d times first); the healed instance's late calls resolved %v after the heal",
		cut, took["running"], took["arrived"], held["running"], held["arrived"], late)
	reportRepeats(t, obs)
}

// reportRepeats logs how the healed instance's repeated Store calls resolved, and fails t
// if one was given up: its record would be left to lapse.
func reportRepeats(t *testing.T, obs *servicetest.Observer) {
	t.Helper()
	var seen []string
	for _, call := range []string{"claim", "complete", "release"} {
		for _, how := range []string{server.ResolvedLanded, server.ResolvedReleased, server.ResolvedFenced, server.ResolvedGaveUp} {
			if n := obs.Count("resolved:" + call + ":" + how); n > 0 {
				seen = append(seen, fmt.Sprintf("%s %s %d", call, how, n))
				if how == server.ResolvedGaveUp {
					t.Errorf("the healed instance gave up %d repeated %s calls", n, call)
				}
			}
		}
	}
	t.Logf("the healed instance's repeated Store calls: %s", strings.Join(seen, ", "))
}

func oneWayConsumer(t *testing.T, c NetConfig, cut string) {
	lease := c.lease()
	l := c.Open(t)
	var done effects
	a := newProcessor(t, l.Store, lease)
	b := startProcessor(t, &consumer.Options{Store: l.Healthy, Lease: lease, Group: t.Name(), RerunAbandoned: true})
	handle := func(id string) func(context.Context) error {
		return func(context.Context) error { done.add(id); return nil }
	}

	started := make(chan struct{}, 1)
	first := make(chan error, 1)
	go func() {
		_, err := a.Process(context.Background(), "q", "running", func(ctx context.Context) error {
			signal(started)
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(4 * lease):
			}
			done.add("running")
			return nil
		})
		first <- err
	}()
	select {
	case <-started:
	case err := <-first:
		t.Fatalf("the first delivery ended before its handler started: %v", err)
	case <-time.After(3 * lease):
		t.Fatal("the first handler did not start within three leases")
	}
	l.cutOf(cut)()
	cutAt := time.Now()
	if res, err := a.Process(context.Background(), "q", "arrived", handle("arrived")); err == nil {
		t.Errorf("a message delivered to the cut-off consumer = %v, want an error (no ack)", res)
	}
	took, held := map[string]time.Duration{}, map[string]int{}
	for _, id := range []string{"running", "arrived"} {
		var res consumer.Result
		// Busy first: the cut-off consumer's claim is in the Store (for the message
		// delivered during the cut, it arrived).
		if res, held[id] = redeliverID(t, b, lease, id, handle(id)); res != consumer.Processed {
			t.Errorf("%s redelivered to the other consumer = %v, want processed", id, res)
		}
		took[id] = since(cutAt)
	}
	<-first // an error or not: what counts is the effect
	holdCut(l, cutAt, lease)
	late := resolved(t, lease, "the healed consumer", a.Shutdown)

	for _, id := range []string{"running", "arrived"} {
		for name, p := range map[string]*consumer.Processor{"the healed consumer": a, "the other consumer": b} {
			if res, _ := redeliverID(t, p, lease, id, handle(id)); res != consumer.Duplicate {
				t.Errorf("%s redelivered to %s after the heal = %v, want duplicate", id, name, res)
			}
		}
	}
	done.wantOnce(t, "running", "arrived")
	t.Logf("cut %s: the other consumer processed the running message %v and the arrived one %v after the cut (found busy %d and %d times first); the healed consumer's late calls resolved %v after the heal",
		cut, took["running"], took["arrived"], held["running"], held["arrived"], late)
}

// signal tells a waiting test that a handler started, without blocking a run it does not
// wait for.
func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// startProcessor returns a Processor on o for the scenarios, shut down when t ends.
func startProcessor(t *testing.T, o *consumer.Options) *consumer.Processor {
	t.Helper()
	p, err := consumer.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	return p
}

// redeliverID processes message id of queue "q" with handle until the result is not Busy
// (the broker redelivers a message not acked), within about a lease, and returns the
// result and how many deliveries were Busy before it.
func redeliverID(t *testing.T, p *consumer.Processor, lease time.Duration, id string, handle func(context.Context) error) (consumer.Result, int) {
	t.Helper()
	var res consumer.Result
	busy := 0
	within(t, lease, "the redelivery of "+id+" is decided", func() bool {
		var err error
		res, err = p.Process(context.Background(), "q", id, handle)
		if err == nil && res == consumer.Busy {
			busy++
		}
		return err == nil && res != consumer.Busy
	})
	return res, busy
}
