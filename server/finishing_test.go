// finishing_test.go: a copy that arrives after its key's handler returned on this
// instance, while the answer is being stored, waits for it and gets the replay instead of
// a 409.

package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

// lateStore holds the completion back until a copy's claim has seen the record in
// progress, so that the copy arrives inside the window.
type lateStore struct {
	server.Store
	claims     atomic.Int64
	completing chan struct{} // closed when the completion is sent
	copyClaims chan struct{} // closed when the copy's claim saw the record
}

func (s *lateStore) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	cl, err := s.Store.Claim(ctx, sc, token, fp, lease, ttl)
	if s.claims.Add(1) == 2 {
		close(s.copyClaims)
	}
	return cl, err
}

func (s *lateStore) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	close(s.completing)
	select {
	case <-s.copyClaims:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Complete(ctx, sc, token, resp, ttl)
}

func TestCopyDuringCompletionWaitsForIt(t *testing.T) {
	ls := &lateStore{completing: make(chan struct{}), copyClaims: make(chan struct{})}
	s := newService(t, server.Options{Store: ls}, nil)
	ls.Store = s.store
	first := make(chan answer, 1)
	go func() { first <- s.post("k-window", s31Body) }()
	<-ls.completing // the handler returned; its answer is being stored
	got := s.post("k-window", s31Body)
	require.True(t, got.replayed(), "the copy got %d %s", got.status, got.body)
	a := <-first
	assert.Equal(t, a.body, got.body)
	assert.EqualValues(t, 1, s.effects.Load())
	assert.Zero(t, s.obs.Count("conflict"))
}
