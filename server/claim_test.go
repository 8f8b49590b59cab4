// claim_test.go: claiming a key: S31, concurrent copies of one key on two instances (409,
// or a bounded wait then the replay), and S37, a Store that is down fails closed (503, the
// handler not run).

package server_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// two returns two instances of one service sharing s's Store, their handler blocked at g.
func two(t *testing.T, opts server.Options, g *gate) (*service, *service) {
	var a *service
	handler := func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			g.wait()
			a.pay(w, r) // one effect counter for both instances
		})
	}
	a = newService(t, opts, handler)
	if opts.Store == nil {
		opts.Store = a.store
	}
	opts.Observer = a.obs
	b := newService(t, opts, handler)
	return a, b
}

const s31Body = `{"amount":1250,"currency":"EUR"}`

// Eight copies of one key reach two instances at once: the handler runs once, the others
// get 409 with Retry-After from the holder's lease; once it finishes, a retry replays.
func TestS31ConcurrentCopiesConflict(t *testing.T) {
	g := newGate(t)
	a, b := two(t, server.Options{}, g)
	const n = 8
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			got, err := s.send(t.Context(), http.MethodPost, "/payments", "k-s31", s31Body)
			assert.NoError(t, err)
			answers[i] = got
		})
	}
	eventually(t, "seven 409s", func() bool { return a.obs.Count("conflict") == n-1 })
	g.release()
	wg.Wait()

	created := 0
	for _, got := range answers {
		switch got.status {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			assert.Equal(t, "key-in-progress", got.problemType(t))
			assert.Equal(t, "1", got.header.Get("Retry-After"), "no handler time seen yet: 1 s, not the holder's 30 s lease")
		default:
			t.Errorf("answer %d: %s", got.status, got.body)
		}
	}
	assert.Equal(t, 1, created)
	assert.EqualValues(t, 1, a.effects.Load(), "the handler ran more than once")
	assert.EqualValues(t, 1, g.entered.Load())

	first := a.post("k-s31", s31Body)
	again := b.post("k-s31", s31Body)
	for _, got := range []answer{first, again} {
		assert.Equal(t, http.StatusCreated, got.status)
		assert.True(t, got.replayed())
		assert.JSONEq(t, `{"id":"pay_1","amount":1250,"currency":"EUR"}`, string(got.body))
	}
	assert.EqualValues(t, 1, a.effects.Load())
}

// With Options.Wait, the copy that finds the key in progress waits for the holder and
// replays its answer instead of 409.
func TestS31WaitThenReplay(t *testing.T) {
	g := newGate(t)
	fs := &flakyStore{}
	a, b := two(t, server.Options{Wait: 5 * time.Second, Store: fs}, g)
	fs.Store = a.store

	firstc := make(chan answer, 1)
	go func() { firstc <- a.post("k-wait", s31Body) }()
	eventually(t, "the first handler", func() bool { return g.entered.Load() == 1 })
	secondc := make(chan answer, 1)
	go func() { secondc <- b.post("k-wait", s31Body) }()
	eventually(t, "the second copy polling", func() bool { return fs.claims.Load() >= 3 })
	g.release()

	first, second := <-firstc, <-secondc
	require.Equal(t, http.StatusCreated, first.status)
	assert.False(t, first.replayed())
	require.Equal(t, http.StatusCreated, second.status, "%s", second.body)
	assert.True(t, second.replayed())
	assert.Equal(t, first.body, second.body)
	assert.Equal(t, first.header.Get("Location"), second.header.Get("Location"))
	assert.EqualValues(t, 1, a.effects.Load())
	assert.EqualValues(t, 1, g.entered.Load())
}

// A bounded wait that runs out answers 409, as without a wait.
func TestS31WaitRunsOut(t *testing.T) {
	g := newGate(t)
	a, b := two(t, server.Options{Wait: 30 * time.Millisecond}, g)
	go a.post("k-wait", s31Body)
	eventually(t, "the first handler", func() bool { return g.entered.Load() == 1 })
	start := time.Now()
	got := b.post("k-wait", s31Body)
	assert.Equal(t, http.StatusConflict, got.status)
	assert.Equal(t, "key-in-progress", got.problemType(t))
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "it did not wait")
	g.release()
	eventually(t, "the first answer stored", func() bool { return a.obs.Count("stored") == 1 })
}

// A copy waiting for the holder stops waiting when its client gives up.
func TestS31WaitHonoursRequestContext(t *testing.T) {
	g := newGate(t)
	a, b := two(t, server.Options{Wait: time.Minute}, g)
	go a.post("k-ctx", s31Body)
	eventually(t, "the first handler", func() bool { return g.entered.Load() == 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.send(ctx, http.MethodPost, "/payments", "k-ctx", s31Body)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
	g.release()
	eventually(t, "the first answer stored", func() bool { return a.obs.Count("stored") == 1 })
	assert.EqualValues(t, 1, a.effects.Load())
}

func TestS37StoreDownFailsClosed(t *testing.T) {
	fs := &flakyStore{}
	s := newService(t, server.Options{Store: fs}, nil)
	fs.Store = s.store
	fs.down.Store(true)
	for range 2 {
		got := s.post("k-s37", s31Body)
		require.Equal(t, http.StatusServiceUnavailable, got.status)
		assert.Equal(t, "store-unavailable", got.problemType(t))
		assert.Equal(t, "1", got.header.Get("Retry-After"))
		assert.NotContains(t, string(got.body), errDown.Error(), "the store's error leaks to the client")
	}
	assert.EqualValues(t, 0, s.effects.Load(), "the handler ran without a claim")
	assert.Equal(t, 2, s.obs.Count("store-error"))
	assert.Zero(t, s.store.Len())

	fs.down.Store(false)
	first := s.post("k-s37", s31Body)
	assert.Equal(t, http.StatusCreated, first.status)
	assert.False(t, first.replayed())
	again := s.post("k-s37", s31Body)
	assert.True(t, again.replayed())
	assert.EqualValues(t, 1, s.effects.Load())
}
