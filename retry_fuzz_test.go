// Fuzz targets for retry.go: parseRetryAfter against an independent oracle
// (RFC 9110 section 10.2.3, the rules in DESIGN "Waiting"), and the bounds of
// every wait the schedule hands out, for any Retry-After, Options and attempt
// number. Seeds live in testdata/fuzz/<FuzzName>/; plain go test runs them.

package idem

import (
	"math"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"
)

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
		s := newSchedule(cfg, clk)
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
