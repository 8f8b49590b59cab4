// repeat_test.go: a Store call whose outcome is unknown is repeated until it lands.

package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idem-go/idem/server"
)

// The Store goes down while the handler runs: its answer reaches the client; the
// completion, whose outcome is unknown, is repeated in the background until the Store is
// back, and then retries get the replay. The handler never runs again.
func TestStoreDownAtCompletionIsRepeated(t *testing.T) {
	fs := &flakyStore{}
	s := newService(t, server.Options{Store: fs}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fs.down.Store(true)
			s.pay(w, r)
		})
	})
	fs.Store = s.store
	first := s.post("k", s31Body)
	assert.Equal(t, http.StatusCreated, first.status)
	assert.Equal(t, 1, s.obs.Count("uncertain:complete"))
	got := s.post("k", s31Body)
	assert.Equal(t, http.StatusServiceUnavailable, got.status, "the store is still down")
	fs.down.Store(false)
	eventually(t, "the repeated completion", func() bool { return s.obs.Count("resolved:complete:landed") == 1 })
	got = s.post("k", s31Body)
	assert.True(t, got.replayed())
	assert.Equal(t, first.body, got.body)
	assert.EqualValues(t, 1, s.effects.Load())
}
