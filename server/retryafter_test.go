// retryafter_test.go: the Retry-After of a 409 comes from the route's recent handler times.

package server_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

// Retry-After estimates when the holder finishes, from the handler times seen on the
// instance for the route: a handler that takes about 200 ms gives Retry-After: 1, not
// the 20 s its lease has left.
func TestRetryAfterFromHandlerTimes(t *testing.T) {
	g := newGate(t)
	var slow atomic.Bool
	s := newService(t, server.Options{Lease: 20 * time.Second}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slow.Load() {
				g.wait()
			}
			time.Sleep(200 * time.Millisecond)
			s.pay(w, r)
		})
	})
	for i := range 3 {
		require.Equal(t, http.StatusCreated, s.post(fmt.Sprintf("k-ra-%d", i), s31Body).status)
	}
	slow.Store(true)
	go s.post("k-ra", s31Body)
	eventually(t, "the held handler", func() bool { return g.entered.Load() == 1 })
	got := s.post("k-ra", s31Body)
	require.Equal(t, http.StatusConflict, got.status)
	assert.Equal(t, "1", got.header.Get("Retry-After"))
	g.release()
	eventually(t, "the held answer stored", func() bool { return s.obs.Count("stored") == 4 })
}
