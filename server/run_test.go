// run_test.go: the lease while the handler runs: the heartbeat renews it, and a handler
// whose lease was taken over cannot store its answer over the new holder's (fencing).

package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

// heldHandler returns a payments handler that closes entered once it runs and pays once
// release is called. The test registers release as a cleanup too, after newService (so
// that it runs before the server closes): a failed test lets the handler go.
func heldHandler() (h func(s *service) http.Handler, entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	h = func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(in)
			<-out
			s.pay(w, r)
		})
	}
	return h, in, sync.OnceFunc(func() { close(out) })
}

// A handler slower than its lease keeps it: the heartbeat renews every Lease/3, so a copy
// sent past the first lease finds the request in progress, not abandoned (Recover is not
// asked); and the heartbeat stops when the handler returns.
func TestHeartbeatRenewsLease(t *testing.T) {
	fs := &flakyStore{}
	var recovers atomic.Int64
	h, entered, release := heldHandler()
	s := newService(t, server.Options{Store: fs, Lease: 30 * time.Second, TTL: time.Hour,
		Recover: func(context.Context, server.RecoverInfo) (server.Recovery, error) {
			recovers.Add(1)
			return server.Recovery{}, nil // not known: the copy is answered 409
		}}, h)
	t.Cleanup(release)
	fs.Store = s.store
	done := s.postAsync("k-hb", s31Body)
	awaitEntered(t, entered, done)
	for want := int64(1); want <= 4; want++ {
		s.advance(10 * time.Second)
		require.Equal(t, want, fs.renews.Load(), "renewals %v after the claim", time.Duration(want)*10*time.Second)
	}
	assert.Equal(t, http.StatusConflict, s.post("k-hb", s31Body).status)
	assert.Zero(t, recovers.Load(), "40 s after the claim, its lease lapsed")
	release()
	assert.Equal(t, http.StatusCreated, await(t, done).status)
	assert.True(t, s.post("k-hb", s31Body).replayed())
	assert.Zero(t, s.obs.Count("lease-lost"))
	s.advance(time.Hour) // many heartbeats: none after the handler returned
	assert.Equal(t, int64(4), fs.renews.Load(), "the heartbeat outlived its handler")
}

// The first handler stalls past its lease; a copy's Recover hook takes the record over and
// reruns it; when the stalled handler finally finishes, its completion is fenced: the
// record keeps the new holder's answer, and the loss is counted once.
func TestFencedCompletionAfterTakeOver(t *testing.T) {
	g := newGate(t)
	var calls atomic.Int64
	var logs syncBuffer
	opts := server.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Lease: 10 * time.Second, Recover: func(context.Context, server.RecoverInfo) (server.Recovery, error) {
		return server.Recovery{Rerun: true}, nil
	}}
	s := newService(t, opts, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				g.wait() // the stalled holder
			}
			s.pay(w, r)
		})
	})
	stalled := s.postAsync("k-fence", s31Body)
	eventually(t, "the first handler", func() bool { return g.entered.Load() == 1 })

	s.clock.Advance(11 * time.Second) // the store's clock only: no heartbeat has run
	second := s.post("k-fence", s31Body)
	require.Equal(t, http.StatusCreated, second.status)
	assert.Contains(t, string(second.body), "pay_1")

	g.release()
	first := await(t, stalled)
	assert.Equal(t, http.StatusCreated, first.status, "the stalled handler's client still gets its answer")
	assert.Contains(t, string(first.body), "pay_2")
	eventually(t, "the lost lease", func() bool { return s.obs.Count("lease-lost") == 1 })

	replay := s.post("k-fence", s31Body)
	assert.True(t, replay.replayed())
	assert.Equal(t, second.body, replay.body, "the stalled holder overwrote the new holder's answer")
	assert.Equal(t, 1, s.obs.Count("stored"))
	assert.Equal(t, 1, s.obs.Count("lease-lost"))
	assert.Contains(t, logs.String(), "lease lost")
	assert.Contains(t, logs.String(), "decision=rerun")
	assert.NotContains(t, logs.String(), "k-fence", "the key reached the log")
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A heartbeat that finds the lease lost reports it once, and the completion that follows
// is not counted again.
func TestHeartbeatLeaseLostCountedOnce(t *testing.T) {
	fs := &lostStore{}
	h, entered, release := heldHandler()
	s := newService(t, server.Options{Store: fs, Lease: 15 * time.Second}, h)
	t.Cleanup(release)
	fs.Store = s.store
	done := s.postAsync("k", s31Body)
	awaitEntered(t, entered, done)
	s.advance(5 * time.Second) // the first renewal: the lease is gone
	require.Equal(t, int64(1), fs.renews.Load())
	release()
	assert.Equal(t, http.StatusCreated, await(t, done).status)
	assert.Equal(t, 1, s.obs.Count("lease-lost"))
	assert.Zero(t, s.obs.Count("stored"))
}

// lostStore loses every lease at the first renewal: it takes the record over itself.
type lostStore struct {
	server.Store
	renews atomic.Int64
}

func (l *lostStore) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	l.renews.Add(1)
	_ = l.Store.Release(ctx, sc, token) // gone: what an expiry or a takeover leaves
	return l.Store.Renew(ctx, sc, token, lease)
}

// A client that goes away does not end the handler's context; a lease the Store stops
// confirming does, with ErrLeaseUnconfirmed as its cause, even after the client left (a
// handler that checks the cause must not read "the client left" and pay on).
func TestUnconfirmedLeaseAfterClientLeft(t *testing.T) {
	fs := &flakyStore{}
	causes := make(chan error, 1)
	entered, quit := make(chan struct{}), make(chan struct{})
	s := newService(t, server.Options{Store: fs, Lease: 30 * time.Second}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			select {
			case <-r.Context().Done():
			case <-quit: // the test failed
				return
			}
			causes <- context.Cause(r.Context())
			server.DiscardResponse(r.Context())
			w.WriteHeader(http.StatusServiceUnavailable)
		})
	})
	t.Cleanup(func() { close(quit) }) // before the server closes
	fs.Store = s.store
	ctx, leave := context.WithCancel(t.Context())
	gone := make(chan sent, 1)
	go func() { _, err := s.send(ctx, http.MethodPost, "/payments", "k-left", s31Body); gone <- sent{err: err} }()
	awaitEntered(t, entered, gone)
	leave() // the client goes away
	select {
	case r := <-gone:
		require.Error(t, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the client's request did not end when it left")
	}
	select {
	case c := <-causes:
		t.Fatalf("the handler's context ended when the client left, with %v", c)
	case <-time.After(100 * time.Millisecond):
	}
	fs.down.Store(true)         // the Store stops answering: the lease can no longer be confirmed
	s.advance(20 * time.Second) // a renewal fails; the local deadline (24 s) has not passed
	select {
	case c := <-causes:
		t.Fatalf("the handler's context ended before the local deadline, with %v", c)
	default:
	}
	s.advance(10 * time.Second)
	select {
	case c := <-causes:
		assert.ErrorIs(t, c, server.ErrLeaseUnconfirmed)
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context never ended")
	}
	fs.down.Store(false)
}
