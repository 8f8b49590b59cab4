// Tests for the server's Retry-After as the attempt loop honours it (retry.go,
// attempt.go): every date form, the cap without long sleeps, any retryable
// status, backoff when it is absent, and past or bad values. Field scenarios
// S01-S05 (SCENARIOS.md, "Retry-After"), on the fake clock.

package idem

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/stretchr/testify/require"
)

func TestS01_RetryAfterHTTPDate(t *testing.T) {
	t.Parallel()
	for name, layout := range map[string]string{"IMF-fixdate": imfFixdate, "RFC 850": rfc850Date, "asctime": asctimeDat} {
		t.Run(name, func(t *testing.T) {
			var sent atomic.Pointer[string]
			var clk *fakeClock
			tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					// 3 s ahead on the client's clock, which starts at real time.
					v := clk.Now().Add(3 * time.Second).UTC().Format(layout)
					sent.Store(&v)
					reply(w, http.StatusTooManyRequests, "Retry-After", v)
					return
				}
				reply(w, http.StatusCreated)
			})

			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)

			retryAt, err := http.ParseTime(*sent.Load())
			require.NoError(t, err)
			reqs := srv.requests()
			require.Len(t, reqs, 2)
			sameKey(t, reqs)
			require.False(t, reqs[1].At.Before(retryAt),
				"second attempt at %v, before the Retry-After instant %v", reqs[1].At.UTC(), retryAt)

			// One wait, exactly up to the instant (the date has whole seconds).
			want := retryAt.Sub(reqs[0].At)
			require.Greater(t, want, 2*time.Second)
			require.LessOrEqual(t, want, 3*time.Second)
			require.Equal(t, []time.Duration{want}, clk.Sleeps())
		})
	}
}

func TestS02_RetryAfterBeyondCap(t *testing.T) {
	opts := func() *Options { return &Options{MaxRetryAfter: 10 * time.Second} }
	always := func(v string) func(int, http.ResponseWriter, *http.Request) {
		return func(_ int, w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusTooManyRequests, "Retry-After", v)
		}
	}

	t.Run("journaled: pending with the server's time, no sleep", func(t *testing.T) {
		tr, clk, srv := newScenario(t, opts(), always("3600"))
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
		require.Less(t, time.Since(start), time.Second)
		require.Nil(t, resp)
		perr := pendingErr(t, err)

		reqs := srv.requests()
		require.Len(t, reqs, 1)
		require.Empty(t, clk.Sleeps(), "no wait may start")
		require.True(t, perr.NextAttempt.Equal(reqs[0].At.Add(time.Hour)),
			"NextAttempt %v, want the server's %v", perr.NextAttempt, reqs[0].At.Add(time.Hour))
		require.Equal(t, http.StatusTooManyRequests, perr.LastStatus)
		require.Equal(t, 1, perr.Attempts)
		require.Equal(t, sameKey(t, reqs), perr.Key)

		rec := onlyRecord(t, tr)
		require.Equal(t, StatePending, rec.State)
		require.True(t, rec.NextAttempt.Equal(perr.NextAttempt), "journaled NextAttempt %v", rec.NextAttempt)
	})

	t.Run("unjournaled: the 429 returned, no sleep", func(t *testing.T) {
		tr, clk, srv := newScenario(t, opts(), always("3600"))
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Equal(t, "3600", resp.Header.Get("Retry-After"))
		require.Equal(t, http.StatusText(http.StatusTooManyRequests), string(drain(t, resp)))
		require.Equal(t, 1, srv.count())
		require.Empty(t, clk.Sleeps())
	})

	t.Run("attempts run out: the server's time is kept", func(t *testing.T) {
		o := opts()
		o.MaxAttempts = 2
		tr, _, srv := newScenario(t, o, always("8"))
		_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
		perr := pendingErr(t, err)
		reqs := srv.requests()
		require.Len(t, reqs, 2)
		earliest := reqs[1].At.Add(8 * time.Second)
		require.False(t, perr.NextAttempt.Before(earliest),
			"NextAttempt %v is before the server's Retry-After %v", perr.NextAttempt, earliest)
	})

	t.Run("cancellation wakes a wait at once", func(t *testing.T) {
		leakcheck.Check(t)
		// Real clock: a 5 s Retry-After, within the default cap, really waits.
		tr, _, srv := newScenario(t, nil, always("5"))
		clk := newSignalClock(realClock{})
		tr.clock = clk
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Cancel once the wait has begun, and time the wake-up from the
		// cancel: neither depends on how long the first attempt took.
		canceled := make(chan time.Time, 1)
		go func() {
			select {
			case <-clk.sleeping:
				canceled <- time.Now()
				cancel()
			case <-ctx.Done():
			}
		}()

		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
		elapsed := time.Since(await(t, canceled, "the call's wait to begin"))
		require.Nil(t, resp)
		require.ErrorIs(t, err, context.Canceled)
		perr := pendingErr(t, err)
		require.Less(t, elapsed, time.Second, "the wait was not woken by cancel")
		require.Equal(t, 1, srv.count())

		// The server's time still holds for Resume.
		require.False(t, perr.NextAttempt.Before(start.Add(4*time.Second)),
			"NextAttempt %v forgets the server's Retry-After", perr.NextAttempt)
		rec := onlyRecord(t, tr)
		require.Equal(t, StatePending, rec.State)
		require.Equal(t, 1, rec.Attempts)
	})
}

func TestS03_RetryAfterOnAnyRetryableStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []int{503, 429, 408, 425, 500, 502, 504} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					reply(w, status, "Retry-After", "2")
					return
				}
				reply(w, http.StatusCreated)
			})
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)

			reqs := srv.requests()
			require.Len(t, reqs, 2)
			require.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), 2*time.Second)
			require.Equal(t, []time.Duration{2 * time.Second}, clk.Sleeps())
		})
	}
}

func TestS04_NoRetryAfterUsesJitteredBackoff(t *testing.T) {
	t.Parallel()
	tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n%2 == 1 {
			reply(w, http.StatusTooManyRequests)
			return
		}
		reply(w, http.StatusOK)
	})
	const calls = 30
	for i := 0; i < calls; i++ {
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		drain(t, resp)
	}
	require.Equal(t, 2*calls, srv.count())

	sleeps := clk.Sleeps()
	require.Len(t, sleeps, calls, "one wait per call")
	distinct := map[time.Duration]bool{}
	for _, d := range sleeps {
		// DefaultInitialInterval with DefaultRandomizationFactor jitter.
		require.GreaterOrEqual(t, d, 125*time.Millisecond)
		require.LessOrEqual(t, d, 375*time.Millisecond)
		distinct[d] = true
	}
	require.Greater(t, len(distinct), calls/2, "waits are not jittered: %v", sleeps)
}

func TestS05_RetryAfterPastOrNegative(t *testing.T) {
	t.Parallel()
	retryOnce := func(v string) func(int, http.ResponseWriter, *http.Request) {
		return func(n int, w http.ResponseWriter, _ *http.Request) {
			if n%2 == 1 {
				reply(w, http.StatusServiceUnavailable, "Retry-After", v)
				return
			}
			reply(w, http.StatusCreated)
		}
	}
	run := func(t *testing.T, tr *Transport, srv *recordingServer, calls int) {
		t.Helper()
		for i := 0; i < calls; i++ {
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)
		}
		require.Equal(t, 2*calls, srv.count())
	}

	for _, past := range []string{"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Thu, 01 Jan 1970 00:00:00 GMT"} {
		t.Run("past date "+past, func(t *testing.T) {
			const initial = 250 * time.Millisecond
			tr, clk, srv := newScenario(t, &Options{InitialInterval: initial}, retryOnce(past))
			run(t, tr, srv, 20)
			sleeps := clk.Sleeps()
			require.Len(t, sleeps, 20)
			for _, d := range sleeps {
				require.Greater(t, d, time.Duration(0))
				require.LessOrEqual(t, d, initial, "a past date means now, plus at most the jitter floor")
			}
		})
	}

	for _, bad := range []string{"-1", "-3600", "1.5", "soon"} {
		t.Run("ignored "+bad, func(t *testing.T) {
			// Backoff waits lie in [5 s, 15 s]: neither "now" nor a misread 1 s.
			opts := &Options{InitialInterval: 10 * time.Second, MaxInterval: time.Minute}
			tr, clk, srv := newScenario(t, opts, retryOnce(bad))
			run(t, tr, srv, 20)
			sleeps := clk.Sleeps()
			require.Len(t, sleeps, 20)
			for _, d := range sleeps {
				require.GreaterOrEqual(t, d, 5*time.Second, "backoff not used")
				require.LessOrEqual(t, d, 15*time.Second, "backoff not used")
			}
		})
	}
}
