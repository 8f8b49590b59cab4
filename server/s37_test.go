// s37_test.go: S37, a Store outage fails closed: 503, the handler not run; when the Store
// is back, the same key works normally. Also a Store that fails after the handler ran.

package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

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
	assert.Equal(t, 2, s.obs.count("store-error"))
	assert.Zero(t, s.store.Len())

	fs.down.Store(false)
	first := s.post("k-s37", s31Body)
	assert.Equal(t, http.StatusCreated, first.status)
	assert.False(t, first.replayed())
	again := s.post("k-s37", s31Body)
	assert.True(t, again.replayed())
	assert.EqualValues(t, 1, s.effects.Load())
}

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
	assert.Equal(t, 1, s.obs.count("uncertain:complete"))
	got := s.post("k", s31Body)
	assert.Equal(t, http.StatusServiceUnavailable, got.status, "the store is still down")
	fs.down.Store(false)
	eventually(t, "the repeated completion", func() bool { return s.obs.count("resolved:complete:landed") == 1 })
	got = s.post("k", s31Body)
	assert.True(t, got.replayed())
	assert.Equal(t, first.body, got.body)
	assert.EqualValues(t, 1, s.effects.Load())
}

// New refuses a nil Store and out-of-range options, rather than failing per request.
func TestNewChecksOptions(t *testing.T) {
	_, err := server.New(&server.Options{})
	assert.ErrorIs(t, err, server.ErrNoStore)
	for name, o := range map[string]server.Options{
		"negative lease":  {Lease: -1},
		"tiny lease":      {Lease: time.Millisecond},
		"store timeout":   {Lease: time.Second, StoreTimeout: time.Second},
		"negative body":   {MaxBodyBytes: -1},
		"ttl below lease": {Lease: 2 * server.DefaultTTL},
		"bad header":      {KeyHeader: "Idempotency Key"},
		"bad method":      {Methods: []string{"PO ST"}},
	} {
		o.Store = &flakyStore{}
		_, err := server.New(&o)
		assert.ErrorIs(t, err, server.ErrInvalidOptions, name)
	}
}
