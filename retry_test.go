// Tests for retry.go: Retry-After parsing (RFC 9110 section 10.2.3) and the
// backoff schedule's bounds, for any attempt number and odd Options.

package idem

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

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
				s := newSchedule(cfg, newFakeClock())
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
			s := newSchedule(cfg, newFakeClock())
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
		s := newSchedule(cfg, newFakeClock())
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
		s := newSchedule(cfg, newFakeClock())
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
				s := newSchedule(cfg, newFakeClock())
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
