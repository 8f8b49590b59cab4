// Tests for Options.Backoff (retry.go): a caller's backoff policy replaces
// the exponential one, on the fake clock, and keeps the invariants every wait
// keeps: in (0, MaxInterval], Retry-After first, MaxRetryAfter its cap.

package idem

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// constBackoff waits d after every attempt.
func constBackoff(d time.Duration) func(int) time.Duration {
	return func(int) time.Duration { return d }
}

// recordingBackoff waits f(n) and records every n it was asked for.
type recordingBackoff struct {
	mu sync.Mutex
	ns []int
	f  func(n int) time.Duration
}

func (b *recordingBackoff) backoff(n int) time.Duration {
	b.mu.Lock()
	b.ns = append(b.ns, n)
	b.mu.Unlock()
	return b.f(n)
}

func (b *recordingBackoff) asked() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.ns...)
}

// A call waits exactly what Backoff says after each retryable attempt, and
// its PendingError's NextAttempt is Backoff's answer for the last attempt.
func TestBackoffOptionShapesWaits(t *testing.T) {
	t.Parallel()
	b := &recordingBackoff{f: func(n int) time.Duration { return time.Duration(n) * 100 * time.Millisecond }}
	tr, clk, srv := memScenario(t, &Options{MaxAttempts: 4, Backoff: b.backoff}, func(_ int, w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("backoff-1", 1)))
	require.Nil(t, resp)
	perr := pendingErr(t, err)
	require.Equal(t, 4, srv.count())
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}, clk.Sleeps(),
		"no sleep after the last attempt")
	require.Equal(t, []int{1, 2, 3, 4}, b.asked())
	require.Equal(t, 400*time.Millisecond, perr.NextAttempt.Sub(clk.Now()), "pending until Backoff(4) from now")

	// Resume counts its attempts from 1 again.
	pastNextAttempt(clk, perr.NextAttempt)
	resumeAll(t, tr)
	require.Equal(t, []int{1, 2, 3, 4, 1, 2, 3, 4}, b.asked())
}

// Backoff's answers are kept in (0, MaxInterval]: 0 or less is 1 ms, more
// than MaxInterval is MaxInterval; with MaxInterval under 1 ms, MaxInterval.
func TestBackoffOptionClamped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		maxInterval time.Duration
		got, want   time.Duration
	}{
		{"negative", 0, -time.Second, time.Millisecond},
		{"most negative", 0, -1 << 63, time.Millisecond},
		{"zero", 0, 0, time.Millisecond},
		{"one nanosecond", 0, 1, 1},
		{"within", 0, 7 * time.Second, 7 * time.Second},
		{"at the default cap", 0, DefaultMaxInterval, DefaultMaxInterval},
		{"over the default cap", 0, time.Hour, DefaultMaxInterval},
		{"over a cap set", 5 * time.Second, time.Minute, 5 * time.Second},
		{"largest", 5 * time.Second, 1<<63 - 1, 5 * time.Second},
		{"zero under a cap below 1 ms", 300 * time.Microsecond, 0, 300 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := (&Options{MaxInterval: tc.maxInterval, Backoff: constBackoff(tc.got)}).config()
			require.NoError(t, err)
			s := newSchedule(cfg, newFakeClock())
			for n := 1; n <= 3; n++ {
				require.Equal(t, tc.want, s.backoff(n), "attempt %d", n)
				d, fromServer := s.wait(nil, time.Now(), n)
				require.False(t, fromServer)
				require.Equal(t, tc.want, d, "attempt %d", n)
			}
		})
	}
}

// A server's Retry-After wins over Backoff, which is not asked for that
// wait; one beyond MaxRetryAfter still gives up at once with the server's time.
func TestBackoffOptionRetryAfterFirst(t *testing.T) {
	t.Parallel()
	b := &recordingBackoff{f: constBackoff(50 * time.Millisecond)}
	tr, clk, srv := memScenario(t, &Options{Backoff: b.backoff}, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			reply(w, http.StatusServiceUnavailable, "Retry-After", "2")
		case 2:
			reply(w, http.StatusServiceUnavailable)
		default:
			reply(w, http.StatusCreated)
		}
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("backoff-2", 1)))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, []time.Duration{2 * time.Second, 50 * time.Millisecond}, clk.Sleeps())
	require.Equal(t, []int{2}, b.asked(), "asked only for the wait the server did not choose")

	tr, clk, srv = memScenario(t, &Options{Backoff: b.backoff}, func(_ int, w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusServiceUnavailable, "Retry-After", "3600")
	})
	start := clk.Now()
	_, err = tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("backoff-3", 1)))
	perr := pendingErr(t, err)
	require.Equal(t, 1, srv.count())
	require.Empty(t, clk.Sleeps())
	require.Equal(t, time.Hour, perr.NextAttempt.Sub(start), "the server's time, past MaxRetryAfter")
}
