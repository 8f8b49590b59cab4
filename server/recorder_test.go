// recorder_test.go: what the recorder keeps of an answer for the replay: S35, answers that
// cannot be replayed (a response over the cap, a streamed one, a hijacked connection), and
// only the bytes the first client was sent.

package server_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/assert"

	"github.com/stretchr/testify/require"
)

// wantNotReplayable checks the answers of two later copies of key: 422 not-replayable,
// naming the original status, with the handler run once in all.
func wantNotReplayable(t *testing.T, s *service, key, body string, status int) {
	t.Helper()
	for range 2 {
		got := s.post(key, body)
		require.Equal(t, http.StatusUnprocessableEntity, got.status, "%s", got.body)
		p := got.problem(t)
		assert.Equal(t, server.DefaultPolicyURL+"#not-replayable", p["type"])
		if status != 0 {
			assert.EqualValues(t, status, p["original_status"])
		} else {
			assert.NotContains(t, p, "original_status")
		}
	}
	assert.EqualValues(t, 1, s.effects.Load(), "an unreplayable answer was run again")
	assert.Equal(t, 1, s.obs.Count("stored"))
}

func TestS35LargeResponse(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16) // 5 MiB
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusCreated)
			for chunk := range slices.Chunk(big, 64<<10) {
				_, _ = w.Write(chunk)
			}
		})
	})
	first := s.post("k-big", `{}`)
	require.Equal(t, http.StatusCreated, first.status)
	assert.True(t, bytes.Equal(big, first.body), "the first answer was cut: %d of %d bytes", len(first.body), len(big))
	wantNotReplayable(t, s, "k-big", `{}`, http.StatusCreated)
}

// A body exactly at the cap is still replayed; one byte more is not.
func TestResponseCapBoundary(t *testing.T) {
	s := newService(t, server.Options{MaxResponseBytes: 10}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			_, _ = w.Write([]byte("12345"))
			_, _ = w.Write([]byte("67890"))
			if r.URL.Query().Get("more") != "" {
				_, _ = w.Write([]byte("!"))
			}
		})
	})
	a, err := s.send(t.Context(), http.MethodPost, "/payments", "k-at", "{}")
	require.NoError(t, err)
	again, err := s.send(t.Context(), http.MethodPost, "/payments", "k-at", "{}")
	require.NoError(t, err)
	assert.True(t, again.replayed())
	assert.Equal(t, "1234567890", string(a.body))
	assert.Equal(t, a.body, again.body)

	over, err := s.send(t.Context(), http.MethodPost, "/payments?more=1", "k-over", "{}")
	require.NoError(t, err)
	assert.Equal(t, "1234567890!", string(over.body))
	again, err = s.send(t.Context(), http.MethodPost, "/payments?more=1", "k-over", "{}")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, again.status)
	assert.EqualValues(t, 2, s.effects.Load())
}

func TestS35StreamedResponse(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: step 1\n\n"))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte("data: step 2\n\n"))
			// and through a ResponseController, as newer handlers flush
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("ResponseController.Flush: %v", err)
			}
		})
	})
	first := s.post("k-stream", `{}`)
	require.Equal(t, http.StatusOK, first.status)
	assert.Equal(t, "data: step 1\n\ndata: step 2\n\n", string(first.body))
	wantNotReplayable(t, s, "k-stream", `{}`, http.StatusOK)
}

func TestS35HijackedConnection(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("Hijack: %v", err)
				return
			}
			defer conn.Close()
			s.effects.Add(1)
			_, _ = rw.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			_ = rw.Flush()
		})
	})
	first := s.post("k-hijack", `{}`)
	require.Equal(t, http.StatusCreated, first.status)
	assert.Equal(t, "ok", string(first.body))
	// The client has its answer once the handler flushed it; the record is completed when
	// the handler returns, a moment later.
	eventually(t, "the completion", func() bool { return s.obs.Count("stored") == 1 })
	wantNotReplayable(t, s, "k-hijack", `{}`, 0)
}

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
