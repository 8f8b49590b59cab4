// Tests for retry.go, the waiting between attempts: Retry-After parsing (RFC
// 9110 section 10.2.3, read as UTC) and as the attempt loop honours it
// (S01-S05), the backoff schedule and Options.Backoff, fuzz targets for both;
// the step clock across wall-clock steps between a give-up and a restart, and
// a Transport reading its store's clock (S30).

package idem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/memjournal"
	"github.com/stretchr/testify/require"
)

// The three HTTP-date forms of RFC 9110 section 5.6.7. The layouts spell GMT
// literally; time.RFC850 would print the zone as "UTC".
const (
	imfFixdate = http.TimeFormat                  // Sun, 06 Nov 1994 08:49:37 GMT
	rfc850Date = "Monday, 02-Jan-06 15:04:05 GMT" // Sunday, 06-Nov-94 08:49:37 GMT
	asctimeDat = time.ANSIC                       // Sun Nov  6 08:49:37 1994
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, time.March, 2, 12, 0, 0, 500_000_000, time.UTC)
	ahead := now.Add(3 * time.Second) // 12:00:03.5; dates keep whole seconds: 12:00:03
	const sat = time.Duration(math.MaxInt64)

	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{"120", 2 * time.Minute, true},
		{" 3 ", 3 * time.Second, true}, // OWS around a field value is not part of it
		{"\t3", 3 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"9223372036", 9223372036 * time.Second, true}, // the largest whole second a Duration holds
		{"9223372037", sat, true},
		{"99999999999999999999", sat, true},

		{"", 0, false},
		{"   ", 0, false},
		{"-1", 0, false},
		{"-0", 0, false},
		{"+3", 0, false},
		{"1.5", 0, false},
		{"3s", 0, false},
		{"1e3", 0, false},
		{"abc", 0, false},
		{"3 4", 0, false},
		{"Tue, 31 Feb 2026 12:00:00 GMT", 0, false},

		{ahead.Format(imfFixdate), 2500 * time.Millisecond, true},
		{ahead.Format(rfc850Date), 2500 * time.Millisecond, true},
		{ahead.Format(asctimeDat), 2500 * time.Millisecond, true},
		{now.Add(time.Hour).Format(imfFixdate), time.Hour - 500*time.Millisecond, true},

		// A date in the past, or this very second, means now.
		{"Sun, 06 Nov 1994 08:49:37 GMT", 0, true},
		{"Sunday, 06-Nov-94 08:49:37 GMT", 0, true},
		{"Sun Nov  6 08:49:37 1994", 0, true},
		{now.Format(imfFixdate), 0, true},
	}
	check := func(t *testing.T, now time.Time) {
		for _, tt := range tests {
			d, ok := parseRetryAfter(tt.in, now)
			require.Equal(t, tt.wantOK, ok, "parseRetryAfter(%q) ok", tt.in)
			require.Equal(t, tt.want, d, "parseRetryAfter(%q)", tt.in)
			require.GreaterOrEqual(t, d, time.Duration(0), "parseRetryAfter(%q)", tt.in)
		}
	}
	t.Run("clock in UTC", func(t *testing.T) { check(t, now) })
	t.Run("dates read as UTC whatever the clock's zone", func(t *testing.T) {
		// The same instant seen from UTC-7: an HTTP-date must still name the
		// same instant. (time.Local is not swapped: other goroutines read it.)
		check(t, now.In(time.FixedZone("PDT", -7*3600)))
	})
}

// oddOptions are configurations whose backoff must still stay in (0, MaxInterval].
var oddOptions = map[string]*Options{
	"defaults":                         nil,
	"initial above max":                {InitialInterval: 10 * time.Second, MaxInterval: time.Second},
	"initial at max":                   {InitialInterval: 30 * time.Second},
	"initial huge":                     {InitialInterval: math.MaxInt64},
	"max 1ns":                          {MaxInterval: time.Nanosecond},
	"max 2ns, initial 1ns, jitter 0.9": {MaxInterval: 2, InitialInterval: 1, RandomizationFactor: 0.9},
	"max 3us":                          {InitialInterval: time.Microsecond, MaxInterval: 3 * time.Microsecond},
	"max below 1ms":                    {InitialInterval: 100 * time.Microsecond, MaxInterval: 700 * time.Microsecond},
	"multiplier 1":                     {Multiplier: 1},
	"multiplier 1000":                  {Multiplier: 1000, MaxInterval: time.Hour},
	"jitter 0.99":                      {RandomizationFactor: 0.99},
	"jitter 0.001":                     {RandomizationFactor: 0.001},
	"max huge":                         {InitialInterval: time.Hour, Multiplier: 10, MaxInterval: math.MaxInt64},
	"max huge, jitter 0.99":            {InitialInterval: time.Hour, Multiplier: 10, MaxInterval: math.MaxInt64, RandomizationFactor: 0.99},
}

func TestScheduleBackoffBounds(t *testing.T) {
	t.Parallel()
	for name, opts := range oddOptions {
		t.Run(name, func(t *testing.T) {
			cfg, err := opts.config()
			require.NoError(t, err)
			for client := 0; client < 20; client++ {
				s := &schedule{cfg: cfg, clk: newFakeClock()}
				for n := 1; n <= 100; n++ {
					d := s.backoff(n)
					require.Greater(t, d, time.Duration(0), "attempt %d", n)
					require.LessOrEqual(t, d, cfg.MaxInterval, "attempt %d", n)
				}
			}
		})
	}
}

func TestScheduleWaitBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, time.March, 2, 12, 0, 0, 0, time.UTC)
	past := &http.Response{Header: http.Header{"Retry-After": {"Sun, 06 Nov 1994 08:49:37 GMT"}}}
	for name, opts := range oddOptions {
		t.Run(name, func(t *testing.T) {
			cfg, err := opts.config()
			require.NoError(t, err)
			s := &schedule{cfg: cfg, clk: newFakeClock()}
			for i := 0; i < 200; i++ {
				d, fromServer := s.wait(past, now, i+1)
				require.True(t, fromServer)
				require.Greater(t, d, time.Duration(0))
				require.LessOrEqual(t, d, cfg.InitialInterval)
				require.LessOrEqual(t, d, cfg.MaxInterval)
			}
		})
	}
}

// The first waits of the default schedule follow the documented shape: 250 ms
// with 50% jitter, doubling.
func TestScheduleDefaultShape(t *testing.T) {
	cfg, err := (*Options)(nil).config()
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		s := &schedule{cfg: cfg, clk: newFakeClock()}
		first, second := s.backoff(1), s.backoff(2)
		require.GreaterOrEqual(t, first, 125*time.Millisecond)
		require.LessOrEqual(t, first, 375*time.Millisecond)
		require.GreaterOrEqual(t, second, 250*time.Millisecond)
		require.LessOrEqual(t, second, 750*time.Millisecond)
	}
}

// S24: 1,000 clients at attempt 20 under a 30 s cap must not wake together.
func TestS24_JitterAtCap(t *testing.T) {
	const maxInterval = 30 * time.Second
	cfg, err := (&Options{MaxInterval: maxInterval}).config()
	require.NoError(t, err)

	delays := make([]time.Duration, 1000)
	for c := range delays {
		s := &schedule{cfg: cfg, clk: newFakeClock()}
		for n := 1; n < 20; n++ {
			s.backoff(n)
		}
		delays[c] = s.backoff(20)
	}

	atCap := 0
	for _, d := range delays {
		require.Greater(t, d, time.Duration(0))
		require.LessOrEqual(t, d, maxInterval)
		if d == maxInterval {
			atCap++
		}
	}
	distinct := slices.Compact(slices.Sorted(slices.Values(delays)))
	lo, hi := slices.Min(delays), slices.Max(delays)
	t.Logf("attempt 20: %d distinct delays in [%v, %v], %d at the cap", len(distinct), lo, hi, atCap)
	require.Greater(t, len(distinct), 900, "delays should be spread out")
	require.Greater(t, hi-lo, 10*time.Second, "delays should span a wide window")
	// A schedule that clamps jittered values to the cap piles about half the
	// clients onto exactly the cap.
	require.Less(t, atCap, 10, "clients bunched at the cap")

	// Spread over the window, not clustered in one part of it.
	var buckets [4]int
	for _, d := range delays {
		i := int(4 * float64(d-lo) / float64(hi-lo+1))
		buckets[i]++
	}
	for i, n := range buckets {
		require.Greater(t, n, 100, "quarter %d of the window holds %d of 1000 delays: %v", i, n, fmt.Sprint(buckets))
	}
}

// RandomizationFactor 1, the top of [0, 1], never yields a wait of 0 or one
// over MaxInterval, whatever the other settings (oddOptions, retry_test.go).
func TestBadInputRandomizationFactorOne(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, time.March, 2, 12, 0, 0, 0, time.UTC)
	past := &http.Response{Header: http.Header{"Retry-After": {"Sun, 06 Nov 1994 08:49:37 GMT"}}}
	for name, odd := range oddOptions {
		t.Run(name, func(t *testing.T) {
			var opts Options
			if odd != nil {
				opts = *odd
			}
			opts.RandomizationFactor = 1
			cfg, err := opts.config()
			require.NoError(t, err)
			require.Equal(t, 1.0, cfg.RandomizationFactor)
			var lo, hi time.Duration
			for client := 0; client < 50; client++ {
				s := &schedule{cfg: cfg, clk: newFakeClock()}
				for n := 1; n <= 60; n++ {
					d := s.backoff(n)
					require.Greater(t, d, time.Duration(0), "attempt %d", n)
					require.LessOrEqual(t, d, cfg.MaxInterval, "attempt %d", n)
					if lo == 0 || d < lo {
						lo = d
					}
					hi = max(hi, d)
				}
				d, fromServer := s.wait(past, now, 61)
				require.True(t, fromServer)
				require.Greater(t, d, time.Duration(0))
				require.LessOrEqual(t, d, min(cfg.InitialInterval, cfg.MaxInterval))
			}
			t.Logf("waits in [%v, %v], cap %v", lo, hi, cfg.MaxInterval)
		})
	}
}

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
			s := &schedule{cfg: cfg, clk: newFakeClock()}
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

// Bounds for the fuzzed "now": years 1 to 9999, where time.Time arithmetic is
// exact, so the oracle can count in big integers without caring about overflow.
const (
	minNowUnix = -62135596800 // 0001-01-01T00:00:00Z
	maxNowUnix = 253402300799 // 9999-12-31T23:59:59Z
)

// fuzzNow maps any pair of integers onto an instant in years 1..9999, keeping
// seconds that are already in range.
func fuzzNow(sec int64, nsec uint32) time.Time {
	if sec < minNowUnix || sec > maxNowUnix {
		span := uint64(maxNowUnix - minNowUnix + 1)
		sec = minNowUnix + int64(uint64(sec)%span)
	}
	return time.Unix(sec, int64(nsec%1e9)).UTC()
}

// retryAfterOracle is what DESIGN "Waiting" says a Retry-After means, written
// without sharing code with parseRetryAfter: surrounding white space is not
// part of the value; all ASCII digits are delta-seconds, saturating at the
// largest time.Duration; otherwise an HTTP-date in one of the three forms of
// RFC 9110 section 5.6.7, read as UTC whatever time.Local is, where a past
// date means 0; anything else is ignored (ok=false).
func retryAfterOracle(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		n, _ := new(big.Int).SetString(v, 10)
		return saturate(n.Mul(n, big.NewInt(int64(time.Second)))), true
	}
	for _, layout := range []string{http.TimeFormat, time.RFC850, time.ANSIC} {
		t, err := time.ParseInLocation(layout, v, time.UTC)
		if err != nil {
			continue
		}
		// Nanoseconds from now to t, exactly.
		d := new(big.Int).Sub(big.NewInt(t.Unix()), big.NewInt(now.Unix()))
		d.Mul(d, big.NewInt(int64(time.Second)))
		d.Add(d, big.NewInt(int64(t.Nanosecond()-now.Nanosecond())))
		if d.Sign() < 0 {
			return 0, true
		}
		return saturate(d), true
	}
	return 0, false
}

func saturate(n *big.Int) time.Duration {
	if !n.IsInt64() {
		return math.MaxInt64
	}
	return time.Duration(n.Int64())
}

func FuzzParseRetryAfter(f *testing.F) {
	// Seeds beside the corpus files: every form at a fixed instant.
	now := time.Date(2026, time.March, 2, 12, 0, 0, 500_000_000, time.UTC)
	for _, v := range []string{
		"3", now.Add(time.Hour).Format(http.TimeFormat),
		now.Add(time.Hour).Format("Monday, 02-Jan-06 15:04:05 GMT"),
		now.Add(time.Hour).Format(time.ANSIC),
	} {
		f.Add(v, now.Unix(), uint32(now.Nanosecond()))
	}
	f.Fuzz(func(t *testing.T, v string, sec int64, nsec uint32) {
		now := fuzzNow(sec, nsec)
		d, ok := parseRetryAfter(v, now)
		want, wantOK := retryAfterOracle(v, now)
		if ok != wantOK || d != want {
			t.Fatalf("parseRetryAfter(%q, %v) = %v, %v; the oracle says %v, %v", v, now, d, ok, want, wantOK)
		}
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("parseRetryAfter(%q, %v) = %v, %v: negative, or a value without ok", v, now, d, ok)
		}
		// The clock's zone changes nothing: an HTTP-date names an instant.
		for _, zone := range []*time.Location{time.FixedZone("PDT", -7*3600), time.FixedZone("NPT", 5*3600+45*60)} {
			if d2, ok2 := parseRetryAfter(v, now.In(zone)); d2 != d || ok2 != ok {
				t.Fatalf("parseRetryAfter(%q) = %v, %v with the clock in UTC, %v, %v in %v", v, d, ok, d2, ok2, zone)
			}
		}
	})
}

// FuzzScheduleWait checks that every wait lies in (0, cap] whatever the
// server sends and whatever the Options: backoff in (0, MaxInterval], a past
// Retry-After in (0, InitialInterval], a future one exactly the server's time
// (the attempt loop gives up rather than wait past MaxRetryAfter), for any
// attempt number.
func FuzzScheduleWait(f *testing.F) {
	f.Add("3", int64(250*time.Millisecond), int64(30*time.Second), 2.0, 0.5, uint16(1), int64(0))
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", int64(1), int64(2), 1.0, 0.99, uint16(500), int64(0))
	f.Add("", int64(math.MaxInt64), int64(math.MaxInt64), 1000.0, 0.001, uint16(65535), int64(1))
	f.Fuzz(func(t *testing.T, ra string, initial, maxInterval int64, mult, jitter float64, n uint16, sec int64) {
		opts := &Options{InitialInterval: time.Duration(initial), MaxInterval: time.Duration(maxInterval),
			Multiplier: mult, RandomizationFactor: jitter}
		cfg, err := opts.config()
		if err != nil {
			return // refused Options never reach a schedule
		}
		clk := newFakeClock()
		s := &schedule{cfg: cfg, clk: clk}
		resp := &http.Response{Header: http.Header{"Retry-After": {ra}}}
		now := fuzzNow(sec, 0)
		server, serverOK := retryAfterOracle(ra, now)
		for i := 0; i <= int(n%300); i++ {
			d := s.backoff(i + 1)
			if d <= 0 || d > cfg.MaxInterval {
				t.Fatalf("attempt %d: backoff %v outside (0, %v]", i+1, d, cfg.MaxInterval)
			}
			clk.Advance(d)
		}
		d, fromServer := s.wait(resp, now, int(n%300)+2)
		switch {
		case fromServer != serverOK:
			t.Fatalf("wait(%q) fromServer=%v, want %v", ra, fromServer, serverOK)
		case d <= 0:
			t.Fatalf("wait(%q) = %v, not positive", ra, d)
		case !fromServer && d > cfg.MaxInterval:
			t.Fatalf("wait(%q) = %v backoff, above MaxInterval %v", ra, d, cfg.MaxInterval)
		case fromServer && server == 0 && d > cfg.InitialInterval:
			t.Fatalf("wait(%q) = %v for a past date, above InitialInterval %v", ra, d, cfg.InitialInterval)
		case fromServer && server > 0 && d != server:
			t.Fatalf("wait(%q) = %v, the server asked for %v", ra, d, server)
		}
	})
}

func TestRetryAfterDateReadAsUTCWhateverLocal(t *testing.T) {
	if os.Getenv("IDEM_TZ_CHILD") == "" {
		// time.Local is set once per process: run this test again in a child
		// whose local zone knows EST and PST.
		cmd := exec.Command(os.Args[0], "-test.run=^TestRetryAfterDateReadAsUTCWhateverLocal$", "-test.count=1")
		race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0") // as helperCommand
		cmd.Env = append(os.Environ(), "IDEM_TZ_CHILD=1", "TZ=America/New_York", "GORACE="+race)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child with TZ=America/New_York:\n%s", out)
	}
	now := time.Date(2026, time.March, 2, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{
		"Monday, 02-Mar-26 13:00:00 GMT",
		"Monday, 02-Mar-26 13:00:00 EST",
		"Monday, 02-Mar-26 13:00:00 PST",
		"Monday, 02-Mar-26 13:00:00 CET",
	} {
		d, ok := parseRetryAfter(v, now)
		require.True(t, ok, "%q (time.Local %v)", v, time.Local)
		require.Equal(t, time.Hour, d, "%q (time.Local %v)", v, time.Local)
	}
}

// restartAt builds a second Transport over tr's journal, as a restarted
// process would, whose stepClock reads a fake wall clock set to at.
func restartAt(tb testing.TB, tr *Transport, at time.Time) (*Transport, *fakeClock) {
	tb.Helper()
	tr2, err := NewTransport(tr.bolt(), &tr.cfg.Options)
	require.NoError(tb, err)
	clk := &fakeClock{now: at}
	tr2.clock = journalClock(clk, tr.bolt()) // as NewTransport's
	return tr2, clk
}

// giveUpOnRetryAfter makes one call that the server answers 429 with
// Retry-After: 2, and returns the operation's pending error: MaxAttempts is
// 1, so the call gives up at once with a next attempt 2 s later.
func giveUpOnRetryAfter(t *testing.T) (*Transport, *recordingServer, *PendingError) {
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			reply(w, http.StatusTooManyRequests, "Retry-After", "2")
			return
		}
		reply(w, http.StatusCreated)
	})
	ctx := WithOperationID(context.Background(), "order-1/charge")
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
	pe := pendingErr(t, err)
	rec := onlyRecord(t, tr)
	require.Equal(t, 2*time.Second, rec.NextAttempt.Sub(rec.LastAttempt))
	return tr, srv, pe
}

// The clock is set back an hour between the give-up and the restart. The
// 2 s Retry-After holds the operation back 2 s, not an hour and 2 s.
func TestClockStepBackResumeWaitsOnlyTheChosenWait(t *testing.T) {
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr2, clk := restartAt(t, tr, pe.NextAttempt.Add(-time.Hour))

	var got outcomes
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Equal(t, 1, srv.count(), "not sent before the server's 2 s")
	require.Empty(t, got.all())

	clk.Advance(2*time.Second + time.Millisecond)
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Equal(t, 1, got.settled(), "sent 2 s after the restart, not an hour later: %v", got.all())
	require.Equal(t, 2, srv.count())
	sameKey(t, srv.requests())
}

// A call that repeats the operation ID after the step gets the 2 s wait in
// its PendingError, then sends once it has passed.
func TestClockStepBackCallWaitsOnlyTheChosenWait(t *testing.T) {
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr2, clk := restartAt(t, tr, pe.NextAttempt.Add(-time.Hour))
	call := func() (*http.Response, error) {
		ctx := WithOperationID(context.Background(), "order-1/charge")
		return tr2.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
	}
	_, err := call()
	pe2 := pendingErr(t, err)
	require.LessOrEqual(t, pe2.NextAttempt.Sub(tr2.clock.Now()), 2*time.Second, "the Transport's time, not the stepped wall clock")

	clk.Advance(2*time.Second + time.Millisecond)
	resp, err := call()
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	drain(t, resp)
	sameKey(t, srv.requests())
}

// The background resumer of the restarted process wakes for the operation
// 2 s after the step, not at its poll interval or an hour later.
func TestClockStepBackResumerWakesAtTheChosenWait(t *testing.T) {
	leakcheck.Check(t)
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr.cfg.ResumeInterval = time.Hour
	tr2, clk := restartAt(t, tr, pe.NextAttempt.Add(-time.Hour))
	c := &Client{journal: tr2.bolt(), transport: tr2}
	var got outcomes
	stop := c.StartResumer(context.Background(), got.add)
	defer stop()
	eventually(t, 2*time.Second, func() bool { return clk.Timers() == 1 }, "the resumer sleeps")
	require.LessOrEqual(t, clk.NextTimer().Sub(clk.Now()), 2*time.Second, "it sleeps for the chosen wait only")

	clk.Advance(2*time.Second + time.Millisecond)
	eventually(t, 2*time.Second, func() bool { return got.settled() == 1 }, "resumed after the chosen wait")
	require.Equal(t, 2, srv.count())
	stop()
	srv.CloseClientConnections()
}

// The clock is set back 2 h after an operation has been pending 23 h. Wall
// time says it is 21 h old; it has been pending at least 23 h, so 2 h 1 min
// later it is past KeyTTL (24 h) and is not sent, where the wall clock alone
// would call it 23 h 1 min old and re-send it after the server forgot it.
func TestClockStepBackKeyTTLNotExtended(t *testing.T) {
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	tr.clock = newStepClock(clk)
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
	pendingErr(t, err)
	created := onlyRecord(t, tr).Created

	clk.Advance(23 * time.Hour)
	require.NoError(t, tr.Resume(context.Background(), nil)) // a retry at 23 h, answered 503
	require.Equal(t, 2, srv.count())
	require.Equal(t, created.Add(23*time.Hour), onlyRecord(t, tr).LastAttempt)

	tr2, clk2 := restartAt(t, tr, created.Add(21*time.Hour)) // 2 h back
	var got outcomes
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Empty(t, got.all(), "not due yet: the backoff runs from the last attempt")
	// The wall clock now says 23 h 1 min: past the next attempt, and within
	// KeyTTL for the wall clock alone.
	clk2.Advance(2*time.Hour + time.Minute)
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Len(t, got.all(), 1)
	require.ErrorIs(t, got.all()[0].Err, ErrKeyExpired)
	require.Equal(t, 2, srv.count(), "not sent past KeyTTL")
	require.Equal(t, StateExpired, onlyRecord(t, tr2).State)
}

// A step forward makes records look older: an operation expires early,
// which is the safe side (ErrKeyExpired: reconcile, nothing sent).
func TestClockStepForwardExpiresEarlyNothingSent(t *testing.T) {
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr2, _ := restartAt(t, tr, pe.NextAttempt.Add(DefaultKeyTTL))
	var got outcomes
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Len(t, got.all(), 1)
	require.True(t, errors.Is(got.all()[0].Err, ErrKeyExpired))
	require.Equal(t, 1, srv.count())
}

// stepClock never reads earlier than a time it returned or observed, and
// after a step back runs on at the wall clock's rate; a forward step is
// taken as it is.
func TestStepClockRatchets(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := &fakeClock{now: start}
	c := newStepClock(clk)
	require.Equal(t, start, c.Now())

	clk.Advance(-time.Hour)
	require.Equal(t, start, c.Now(), "a step back is absorbed")
	clk.Advance(time.Second)
	require.Equal(t, start.Add(time.Second), c.Now(), "and time runs on from there")

	c.observe(start.Add(time.Minute)) // a journal time in the future
	require.Equal(t, start.Add(time.Minute), c.Now())

	clk.Advance(time.Hour)
	require.Equal(t, start.Add(time.Hour+time.Minute), c.Now(), "a step forward is taken")

	clk.Advance(-stepTolerance / 2) // goroutines' readings out of order: no step
	require.Equal(t, start.Add(time.Hour+time.Minute-stepTolerance/2), c.Now())
}

// keyExpired and dueAt, the one rule each, across both directions of a step.
func TestKeyExpiredAndDueAtAcrossSteps(t *testing.T) {
	cfg, err := (&Options{KeyTTL: time.Hour, MaxInterval: 10 * time.Second, MaxRetryAfter: 20 * time.Second}).config()
	require.NoError(t, err)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &Record{Created: t0, Updated: t0, LastAttempt: t0.Add(30 * time.Minute),
		NextAttempt: t0.Add(30*time.Minute + 5*time.Second)}

	require.False(t, keyExpired(rec, t0.Add(time.Hour), time.Hour), "exactly KeyTTL old is not past it")
	require.True(t, keyExpired(rec, t0.Add(time.Hour+time.Nanosecond), time.Hour))
	require.False(t, keyExpired(rec, t0.Add(-time.Hour), time.Hour), "dated in the future: aged from its last write")

	require.Equal(t, rec.NextAttempt, cfg.dueAt(rec, t0.Add(30*time.Minute)))
	back := t0.Add(-24 * time.Hour) // the clock went back a day, before LastAttempt
	require.Equal(t, back.Add(5*time.Second), cfg.dueAt(rec, back), "held back the chosen 5 s, from now")
	require.Equal(t, t0.Add(2*time.Hour), cfg.dueAt(rec, t0.Add(2*time.Hour)), "past KeyTTL: due at once")

	// The server's long Retry-After (S02) stands: 1 h chosen, 1 h from now.
	long := &Record{Created: t0, LastAttempt: t0, NextAttempt: t0.Add(50 * time.Minute)}
	require.Equal(t, back.Add(50*time.Minute), cfg.dueAt(long, back))
	// A next attempt with no last attempt waits at most max(MaxRetryAfter, MaxInterval).
	odd := &Record{Created: t0, NextAttempt: t0.Add(50 * time.Minute)}
	require.Equal(t, t0.Add(20*time.Second), cfg.dueAt(odd, t0))
}

// stallClock is a wall clock whose Now can be made to stall after it has
// read the time and before it returns it, as a goroutine preempted (GC,
// CPU throttling, SIGSTOP) between the two does.
type stallClock struct {
	mu    sync.Mutex
	now   time.Time
	stall chan struct{} // non-nil: the next Now waits on it after reading
	read  chan struct{} // closed once the stalled Now has read
}

func (c *stallClock) Now() time.Time {
	c.mu.Lock()
	v, stall, read := c.now, c.stall, c.read
	c.stall = nil
	c.mu.Unlock()
	if stall != nil {
		close(read)
		<-stall
	}
	return v
}

func (c *stallClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *stallClock) Sleep(context.Context, time.Duration) error { return nil }
func (c *stallClock) After(time.Duration) (<-chan time.Time, func()) {
	return make(chan time.Time), func() {}
}

// A goroutine reads the wall clock and stalls for 5 s before the stepClock
// compares its reading; meanwhile another reads the clock. The stale
// reading is not a step back of the wall clock: the clock was never set.
// Before the fix stepClock took it for one and added 5 s of skew to every
// later reading, for good; every such stall moved idem's time further ahead
// of the wall clock (records look older than they are, Retry-After dates
// nearer). Now a reading that looks like a step is taken again first.
func TestStepClockStalledReaderIsNoStep(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	wall := &stallClock{now: start}
	c := newStepClock(wall)
	c.Now()

	release := make(chan struct{})
	wall.mu.Lock()
	wall.stall, wall.read = release, make(chan struct{})
	read := wall.read
	wall.mu.Unlock()
	done := make(chan time.Time)
	go func() { done <- c.Now() }() // reads start, then stalls
	<-read
	wall.advance(5 * time.Second)
	c.Now() // another goroutine, on time
	close(release)
	<-done

	wall.advance(time.Second)
	if got, want := c.Now(), start.Add(6*time.Second); got.Sub(want) > stepTolerance {
		t.Fatalf("idem's clock reads %v, the wall clock %v: %v ahead after one stalled reading", got, want, got.Sub(want))
	}
}

// The wall clock is set back two days while the process is down (a machine
// whose clock starts behind until NTP syncs). After the restart, before
// anything has read the journal, a new operation is written ahead; the
// server answers 503 and it stays pending. The startup Resume then reads an
// older pending record. Before the fix the new Transport's clock had seen
// no journal time yet: the new operation was dated two days back, the clock
// jumped ahead by the step at the read, and the operation, a minute old,
// looked two days old and expired (ErrKeyExpired, never sent again). Now
// the clock starts from the newest time the journal holds.
func TestClockStepBackBeforeFirstReadKeepsNewOperation(t *testing.T) {
	t.Parallel()
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	tr.clock = newStepClock(clk)
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).
		WithContext(WithOperationID(context.Background(), "old")))
	pendingErr(t, err)
	old := onlyRecord(t, tr)

	tr2, clk2 := restartAt(t, tr, old.Created.Add(-48*time.Hour)) // two days back
	_, err = tr2.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).
		WithContext(WithOperationID(context.Background(), "new")))
	pendingErr(t, err)
	clk2.Advance(time.Minute) // past the new operation's backoff
	var got outcomes
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	seen := false
	for _, o := range got.all() {
		if o.Record.OperationID == "new" {
			seen = true
			require.NotErrorIs(t, o.Err, ErrKeyExpired, "an operation a minute old expired")
		}
	}
	require.True(t, seen, "the new operation was resumed")
}

// The newest time a journal holds survives a reopen: a Transport built over
// the reopened journal starts from it, whatever the wall clock says. It is
// not the time of the last record of either bucket: the first operation
// settles last. (boltjournal's TestWrittenScannedWhenMissing has a file
// written before the time was kept.)
func TestJournalNewestTimeSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)
	newest := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	var recs []*Record
	for i, at := range []time.Time{newest.Add(-2 * time.Hour), newest.Add(-time.Hour)} {
		rec := &Record{Key: fmt.Sprintf("key-%d", i), Method: http.MethodPost, URL: "https://pay.example/payments",
			Body: []byte("{}"), Created: at, Updated: at, State: StatePending}
		require.NoError(t, insertRec(j, rec, true))
		recs = append(recs, rec)
	}
	recs[1].State, recs[1].Updated = StateSettled, newest.Add(-30*time.Minute)
	require.NoError(t, saveRec(j, recs[1]))
	recs[0].State, recs[0].Updated = StateSettled, newest
	require.NoError(t, saveRec(j, recs[0]))
	require.NoError(t, j.Close())

	reopen := func() *boltjournal.Journal {
		j, err := boltjournal.Open(path, nil)
		require.NoError(t, err)
		t.Cleanup(func() { j.Close() })
		return j
	}
	j = reopen()
	require.Equal(t, newest, j.LatestWritten().UTC(), "the first operation's settle")
	clk := &fakeClock{now: newest.Add(-48 * time.Hour)} // set back two days
	require.False(t, journalClock(clk, j).Now().Before(newest), "a clock over the journal reads no earlier")
}

// clockedStore is a Store that keeps its own time (journal.Clock), as a
// shared database does: here an hour ahead of this machine.
type clockedStore struct {
	*memjournal.Store
	offset time.Duration
}

func (s clockedStore) Now() time.Time { return time.Now().Add(s.offset) }

// S30: a Transport over a Store with a clock dates and judges operations
// by the Store's time, not this machine's: a record due by the shared
// clock is sent, though this machine's clock says it is an hour early.
func TestS30TransportReadsTheStoresClock(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	store := clockedStore{Store: memjournal.New(nil), offset: time.Hour}
	tr, err := NewTransport(store, nil)
	if err != nil {
		t.Fatal(err)
	}

	req, _ := http.NewRequestWithContext(WithOperationID(context.Background(), "dated"), http.MethodPost,
		srv.URL, strings.NewReader("{}"))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec, err := store.Get(context.Background(), journal.Name{OperationID: "dated"})
	if err != nil || rec == nil {
		t.Fatalf("Get: %v, %v", rec, err)
	}
	if d := rec.Created.Sub(store.Now()); d < -time.Minute || d > time.Minute {
		t.Fatalf("the record was created %v from the Store's time, want by it", d)
	}

	// Due a second ago by the Store's clock, an hour ahead by this machine's.
	due := &Record{Key: "key-due", OperationID: "due", Method: http.MethodPost, URL: srv.URL, Body: []byte("{}")}
	due.BodySHA256 = journal.BodySum(due.Body)
	journal.Apply(due, journal.EventCreate, journal.Change{Now: store.Now().Add(-2 * time.Second)})
	due.Attempts, due.NextAttempt = 1, store.Now().Add(-time.Second)
	if err := store.Create(context.Background(), due); err != nil {
		t.Fatal(err)
	}
	before := hits.Load()
	if err := tr.Resume(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != before+1 {
		t.Fatalf("Resume sent %d requests, want the one due by the Store's clock", hits.Load()-before)
	}
}

func BenchmarkBackoff(b *testing.B) {
	cfg, err := (&Options{}).config()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	resp := &http.Response{Header: http.Header{"Retry-After": {"3"}}}
	b.ReportAllocs()
	for b.Loop() {
		s := &schedule{cfg: cfg, clk: realClock{}}
		for n := range 6 {
			s.backoff(n + 1)
		}
		s.wait(resp, now, 7)
	}
}
