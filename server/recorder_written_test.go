// recorder_written_test.go: the replay holds what the first client was sent, not what the
// handler tried to write. net/http refuses writes past a declared Content-Length (and
// bodies on 204/304); those bytes never reach the client and must not be replayed.

package server_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idem-go/idem/server"
)

func TestReplayHoldsOnlyBytesTheClientWasSent(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
			if _, err := io.WriteString(w, " world"); err != http.ErrContentLength {
				t.Errorf("the write past Content-Length returned %v", err)
			}
		})
	})
	first := s.post("k-cl", s32Body)
	assert.Equal(t, "hello", string(first.body))
	again := s.post("k-cl", s32Body)
	assert.True(t, again.replayed())
	assert.Equal(t, string(first.body), string(again.body), "the replay differs from the answer")
	assert.EqualValues(t, 1, s.effects.Load())
}
