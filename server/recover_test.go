// recover_test.go: S32, a record left in progress by a holder that died: 409 until it
// expires without a Recover hook; with one, the hook decides (replay what it found, run
// again, or leave it undecided); a hook slower than the lease does not run twice.

package server_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/assert"

	"github.com/stretchr/testify/require"
)

const s32Body = `{"amount":700,"currency":"EUR"}`

// deadStore is the Store as seen by a holder that died: while dead is set, its renewals,
// completions and releases never reach the Store, for the process that would have sent
// them is gone.
type deadStore struct {
	server.Store
	dead atomic.Bool
}

func (d *deadStore) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	if d.dead.Load() {
		return nil
	}
	return d.Store.Renew(ctx, sc, token, lease)
}

func (d *deadStore) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	if d.dead.Load() {
		return nil
	}
	return d.Store.Complete(ctx, sc, token, resp, ttl)
}

func (d *deadStore) Release(ctx context.Context, sc server.Scope, token string) error {
	if d.dead.Load() {
		return nil
	}
	return d.Store.Release(ctx, sc, token)
}

// crashedOnce starts a service whose process dies mid-request for its first request, under
// key: after its effect (effectFirst), as a crash after the charge leaves it, or before it.
// The record is left in progress; later requests reach the payments handler.
func crashedOnce(t *testing.T, opts server.Options, key string, effectFirst bool) *service {
	t.Helper()
	var crash atomic.Bool
	crash.Store(true)
	ds := &deadStore{}
	ds.dead.Store(true)
	opts.Store = ds
	s := newService(t, opts, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if crash.Load() {
				if effectFirst {
					s.effects.Add(1)
				}
				panic(http.ErrAbortHandler) // the connection drops; nothing more reaches the Store
			}
			s.pay(w, r)
		})
	})
	ds.Store = s.store
	_, err := s.send(t.Context(), http.MethodPost, "/payments", key, s32Body)
	require.Error(t, err, "the crashed request got an answer")
	crash.Store(false)
	ds.dead.Store(false)
	return s
}

func TestS32StuckWithoutRecoverAnswers409UntilExpiry(t *testing.T) {
	s := crashedOnce(t, server.Options{Lease: 10 * time.Second, TTL: time.Hour}, "k-s32", true)

	got := s.post("k-s32", s32Body) // within the dead holder's lease: looks in progress
	assert.Equal(t, http.StatusConflict, got.status)
	assert.Equal(t, "key-in-progress", got.problemType(t))

	s.clock.Advance(10 * time.Second) // the lease lapsed: stuck
	for range 2 {
		got = s.post("k-s32", s32Body)
		assert.Equal(t, http.StatusConflict, got.status)
		assert.Equal(t, "key-stuck", got.problemType(t))
		ra, err := strconv.Atoi(got.header.Get("Retry-After"))
		require.NoError(t, err)
		assert.InDelta(t, (time.Hour - 10*time.Second).Seconds(), ra, 1, "Retry-After is not the time to expiry")
	}
	assert.EqualValues(t, 1, s.effects.Load(), "the stuck record was re-run")
	assert.Equal(t, 2, s.obs.Count("conflict-stuck"))

	s.clock.Advance(time.Hour) // expired: the key is new again (the draft's documented limit)
	got = s.post("k-s32", s32Body)
	assert.Equal(t, http.StatusCreated, got.status)
	assert.False(t, got.replayed())
	assert.EqualValues(t, 2, s.effects.Load())
}

// The hook finds the effect by its business reference and answers with it: the answer is
// stored and replayed, and the hook is not asked again.
func TestS32RecoverReplaysFoundEffect(t *testing.T) {
	var asked atomic.Int64
	opts := server.Options{Lease: 10 * time.Second, Recover: func(ctx context.Context, info server.RecoverInfo) (server.Recovery, error) {
		asked.Add(1)
		if string(info.Body) != s32Body || info.Request.Method != http.MethodPost || info.Scope.Key != "k-s32" {
			t.Errorf("RecoverInfo = %+v, body %q", info.Scope, info.Body)
		}
		return server.Recovery{Response: &server.Response{
			Status: http.StatusCreated,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   []byte(`{"id":"pay_1","recovered":true}`),
		}}, nil
	}}
	s := crashedOnce(t, opts, "k-s32", true)

	assert.Equal(t, http.StatusConflict, s.post("k-s32", s32Body).status, "recovered while the lease ran")
	assert.EqualValues(t, 0, asked.Load())
	s.clock.Advance(11 * time.Second)
	for range 2 {
		got := s.post("k-s32", s32Body)
		assert.Equal(t, http.StatusCreated, got.status)
		assert.True(t, got.replayed())
		assert.Equal(t, `{"id":"pay_1","recovered":true}`, string(got.body))
	}
	assert.EqualValues(t, 1, asked.Load())
	assert.EqualValues(t, 1, s.effects.Load(), "the handler ran again")
	assert.Equal(t, 1, s.obs.Count("recovered:replay 201"))
}

// The hook establishes that the effect did not happen: the handler runs again, once.
func TestS32RecoverReruns(t *testing.T) {
	opts := server.Options{Lease: 10 * time.Second, Recover: func(context.Context, server.RecoverInfo) (server.Recovery, error) {
		return server.Recovery{Rerun: true}, nil
	}}
	s := crashedOnce(t, opts, "k-s32", false)
	s.clock.Advance(11 * time.Second)
	got := s.post("k-s32", s32Body)
	assert.Equal(t, http.StatusCreated, got.status)
	assert.False(t, got.replayed())
	again := s.post("k-s32", s32Body)
	assert.True(t, again.replayed())
	assert.Equal(t, got.body, again.body)
	assert.EqualValues(t, 1, s.effects.Load())
}

// A hook that cannot tell yet (or fails) leaves the record stuck: 409, and the hook is
// asked again once the taking-over copy's lease has lapsed in turn.
func TestS32RecoverUndecided(t *testing.T) {
	var asked atomic.Int64
	opts := server.Options{Lease: 10 * time.Second, Recover: func(context.Context, server.RecoverInfo) (server.Recovery, error) {
		asked.Add(1)
		return server.Recovery{}, nil
	}}
	s := crashedOnce(t, opts, "k-s32", true)
	s.clock.Advance(11 * time.Second)
	got := s.post("k-s32", s32Body)
	assert.Equal(t, http.StatusConflict, got.status)
	assert.Equal(t, "key-stuck", got.problemType(t))
	assert.Equal(t, "10", got.header.Get("Retry-After"))
	assert.Equal(t, "key-in-progress", s.post("k-s32", s32Body).problemType(t), "asked again within the lease")
	assert.EqualValues(t, 1, asked.Load())
	s.clock.Advance(11 * time.Second)
	s.post("k-s32", s32Body)
	assert.EqualValues(t, 2, asked.Load())
	assert.EqualValues(t, 1, s.effects.Load())
}

// A Recover hook that answers a response without a final status (a zero Status) is an
// error: the record stays stuck (409), and no copy panics writing it.
func TestS32RecoverBadStatusIsAnError(t *testing.T) {
	opts := server.Options{Lease: 10 * time.Second, Recover: func(context.Context, server.RecoverInfo) (server.Recovery, error) {
		return server.Recovery{Response: &server.Response{Body: []byte("found")}}, nil
	}}
	s := crashedOnce(t, opts, "k-s32", true)
	s.clock.Advance(11 * time.Second)
	got := s.post("k-s32", s32Body)
	assert.Equal(t, http.StatusConflict, got.status)
	assert.Equal(t, "key-stuck", got.problemType(t))
	assert.Equal(t, "key-in-progress", s.post("k-s32", s32Body).problemType(t), "asked again after a lease, as undecided")
	assert.EqualValues(t, 1, s.effects.Load())
}

func TestRecoverSlowerThanLeaseDoesNotRunTwice(t *testing.T) {
	entered := make(chan struct{})
	unblock := make(chan struct{})
	var asked atomic.Int64
	opts := server.Options{Lease: 10 * time.Second, Recover: func(context.Context, server.RecoverInfo) (server.Recovery, error) {
		if asked.Add(1) == 1 {
			close(entered)
			<-unblock // the first hook is slow: it outlives the taking-over copy's lease
		}
		return server.Recovery{Rerun: true}, nil
	}}
	s := crashedOnce(t, opts, "k-slow", false)
	s.clock.Advance(11 * time.Second) // stuck

	first := make(chan answer, 1)
	go func() {
		a, err := s.send(context.Background(), http.MethodPost, "/payments", "k-slow", s32Body)
		if err != nil {
			t.Errorf("first copy: %v", err)
		}
		first <- a
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		close(unblock)
		t.Fatal("the first copy never asked Recover")
	}
	s.clock.Advance(11 * time.Second) // the first copy's take-over lapsed while its hook ran
	second := s.post("k-slow", s32Body)
	assert.Equal(t, http.StatusCreated, second.status)
	close(unblock)
	got := <-first
	assert.NotEqual(t, http.StatusCreated, got.status, "the slow copy ran the handler too")
	assert.EqualValues(t, 1, s.effects.Load(), "the handler ran twice for one key")
}
