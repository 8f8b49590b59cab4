// Scenarios S06-S08 (SCENARIOS.md, "Bodies and connections"): every attempt
// carries the byte-identical body with a matching Content-Length, a reused
// *http.Request still sends its body, and discarded responses are drained and
// closed so connections and goroutines stay flat. (S09 is in the key tests.)

package idem

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestS06_RetryCarriesIdenticalBody(t *testing.T) {
	tests := []struct {
		name   string
		method string
		newReq func(t *testing.T, url string) (*http.Request, *countingBody)
	}{
		{"POST from http.NewRequest", http.MethodPost, func(t *testing.T, url string) (*http.Request, *countingBody) {
			return newRequest(t, http.MethodPost, url, payload), nil
		}},
		{"POST with a bare body of unknown length", http.MethodPost, func(t *testing.T, url string) (*http.Request, *countingBody) {
			body := &countingBody{Reader: strings.NewReader(payload)}
			req, err := http.NewRequest(http.MethodPost, url, body)
			require.NoError(t, err)
			require.Nil(t, req.GetBody)
			require.Zero(t, req.ContentLength)
			return req, body
		}},
		{"unjournaled PUT", http.MethodPut, func(t *testing.T, url string) (*http.Request, *countingBody) {
			body := &countingBody{Reader: strings.NewReader(payload)}
			req, err := http.NewRequest(http.MethodPut, url, body)
			require.NoError(t, err)
			req.ContentLength = int64(len(payload))
			return req, body
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					reply(w, http.StatusInternalServerError)
					return
				}
				reply(w, http.StatusCreated)
			})
			req, counted := tt.newReq(t, srv.URL)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)

			reqs := srv.requests()
			require.Len(t, reqs, 2)
			require.Len(t, clk.Sleeps(), 1)
			for i, r := range reqs {
				require.Equal(t, tt.method, r.Method)
				sameBytes(t, []byte(payload), r.Body, "attempt %d body", i+1)
				require.Equal(t, int64(len(payload)), r.ContentLength, "attempt %d Content-Length", i+1)
			}
			if tt.method == http.MethodPost {
				sameKey(t, reqs)
			}
			if counted != nil {
				require.Equal(t, int32(1), counted.closes.Load(), "the caller's body is closed exactly once")
			}
		})
	}
}

func TestS07_ReusedRequest(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			// Each call meets 503 once, so each call makes two attempts.
			tr, _, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
				if n%2 == 1 {
					reply(w, http.StatusServiceUnavailable)
					return
				}
				reply(w, http.StatusCreated)
			})
			client := &http.Client{Transport: tr}
			req := newRequest(t, method, srv.URL, payload)
			require.NotNil(t, req.GetBody)

			const calls = 3
			for i := 1; i <= calls; i++ {
				resp, err := client.Do(req)
				require.NoError(t, err, "call %d", i)
				require.Equal(t, http.StatusCreated, resp.StatusCode, "call %d", i)
				drain(t, resp)
			}

			reqs := srv.requests()
			require.Len(t, reqs, 2*calls)
			for i, r := range reqs {
				sameBytes(t, []byte(payload), r.Body, "call %d attempt %d body", i/2+1, i%2+1)
				require.Equal(t, int64(len(payload)), r.ContentLength, "call %d attempt %d", i/2+1, i%2+1)
			}
		})
	}

	// A reused request with no way to rebuild its body must not be sent with a
	// silently shortened one.
	t.Run("spent body without GetBody", func(t *testing.T) {
		tr, _, srv := newScenario(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusCreated)
		})
		req := newRequest(t, http.MethodPost, srv.URL, payload)
		req.GetBody = nil
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(t, resp)

		resp, err = tr.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrInvalidRequest)
		require.Equal(t, 1, srv.count(), "nothing sent for the second call")
	})
}

func TestS08_DiscardedBodiesDrained(t *testing.T) {
	checkGoroutines(t)
	filler := strings.Repeat("x", 1<<10) // below the drain bound: the connection can be reused
	tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, filler)
			return
		}
		reply(w, http.StatusCreated)
	})
	// S08 is about connections, not durability: skip the fsyncs that would
	// make 1,000 journaled calls take seconds under -race.
	boltDB(tr.bolt()).NoSync = true
	// Two failures in three is an outage to the retry budget, which would
	// (rightly) stop retrying after a while; S08 needs every retry made.
	tr.budget = newBudget(RetryBudget{Disabled: true})
	tracker := &bodyTracker{base: tr.cfg.Base}
	tr.cfg.Base = tracker
	call := func() {
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		drain(t, resp)
	}

	call() // warm up: one connection open and idle
	goroutines := runtime.NumGoroutine()

	const calls = 1000
	for i := 0; i < calls; i++ {
		call()
	}

	require.Equal(t, 3*(calls+1), srv.count())
	bodies := tracker.tracked()
	require.Len(t, bodies, 3*(calls+1))
	for i, b := range bodies {
		require.Equal(t, int32(1), b.closes.Load(), "body %d (status %d) closes", i, b.status)
		require.True(t, b.eof.Load(), "body %d (status %d) not drained", i, b.status)
	}
	require.Len(t, clk.Sleeps(), 2*(calls+1))
	// An undrained or unclosed body costs its connection: thousands of them.
	require.LessOrEqual(t, srv.conns.Load(), int64(2), "connections opened for %d attempts", srv.count())
	after := waitGoroutines(goroutines+2, 2*time.Second)
	require.LessOrEqual(t, after, goroutines+2, "goroutines grew from %d", goroutines)

	recs, err := tr.bolt().Records()
	require.NoError(t, err)
	require.Len(t, recs, calls+1)
	for _, rec := range recs {
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, 3, rec.Attempts)
	}
}
