// recover_slow_test.go: a Recover hook slower than the lease. The copy that took the stuck
// record over holds no heartbeat while its hook runs, so another copy may take the record
// over in turn; the first copy must then not run the handler on the hook's word.

package server_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idem-go/idem/server"
)

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
