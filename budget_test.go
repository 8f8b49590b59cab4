package idem

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryBudgetBucket(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := newBudget(RetryBudget{Ratio: 0.1, Burst: 3})
	const host = "api.example:443"

	for i := range 3 {
		require.True(t, b.retry(host, now), "retry %d of the burst", i+1)
	}
	require.False(t, b.retry(host, now), "burst spent")
	require.Zero(t, b.available(host))

	// Ten first attempts at 0.1 make exactly one retry: no rounding drift.
	for range 9 {
		b.first(host, now)
	}
	require.False(t, b.retry(host, now), "0.9 of a token is not a retry")
	b.first(host, now)
	require.True(t, b.retry(host, now))
	require.False(t, b.retry(host, now))

	// An answer earns one token; an answer to a retry earns its token back too.
	b.answered(host, false)
	require.Equal(t, 1.0, b.available(host))
	b.answered(host, true)
	require.Equal(t, 3.0, b.available(host))
	b.answered(host, true)
	require.Equal(t, 3.0, b.available(host), "never above Burst")
	require.Empty(t, b.hosts, "a full bucket is not kept")

	// Hosts are told apart, case-insensitively.
	require.True(t, b.retry("API.example:443", now))
	require.Equal(t, 2.0, b.available(host))
	require.Equal(t, 3.0, b.available("other:80"))
}

// An empty bucket with no first attempts for probeEvery allows one probe.
func TestRetryBudgetProbe(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := newBudget(RetryBudget{Burst: 1})
	const host = "h:1"
	require.True(t, b.retry(host, now))
	require.False(t, b.retry(host, now.Add(probeEvery-time.Millisecond)))
	require.True(t, b.retry(host, now.Add(probeEvery)), "a probe after a quiet second")
	require.False(t, b.retry(host, now.Add(probeEvery)), "one probe per second")

	// A first attempt is traffic: the next probe waits a second from it.
	b.first(host, now.Add(probeEvery+500*time.Millisecond))
	require.False(t, b.retry(host, now.Add(2*probeEvery)))
	require.True(t, b.retry(host, now.Add(2*probeEvery+500*time.Millisecond)))
}

func TestRetryBudgetDisabled(t *testing.T) {
	b := newBudget(RetryBudget{Disabled: true, Burst: 1, Ratio: 0.1})
	for range 1000 {
		require.True(t, b.retry("h:1", time.Time{}))
	}
	require.Empty(t, b.hosts)
}

func TestRetryBudgetBoundedHosts(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := newBudget(RetryBudget{Burst: 1})
	for i := range 3 * maxBudgetHosts {
		require.True(t, b.retry(fmt.Sprintf("h%d:1", i), now))
	}
	require.LessOrEqual(t, len(b.hosts), maxBudgetHosts)
}

func TestRetryBudgetOptions(t *testing.T) {
	cfg, err := (&Options{}).config()
	require.NoError(t, err)
	require.Equal(t, RetryBudget{Ratio: DefaultRetryRatio, Burst: DefaultRetryBurst}, cfg.RetryBudget)

	for _, bad := range []RetryBudget{
		{Ratio: -0.1}, {Ratio: math.NaN()}, {Ratio: math.Inf(1)}, {Ratio: maxRetryRatio + 1},
		{Burst: -1}, {Burst: maxRetryBurst + 1},
	} {
		_, err := (&Options{RetryBudget: bad}).config()
		require.ErrorIs(t, err, ErrInvalidOptions, "%+v", bad)
		require.ErrorContains(t, err, "RetryBudget.")
	}
}

func TestBudgetHost(t *testing.T) {
	for in, want := range map[string]string{
		"https://API.example/p":     "api.example:443",
		"https://api.example:443/p": "api.example:443",
		"http://api.example/p":      "api.example:80",
		"http://api.example:8080/p": "api.example:8080",
		"https://[::1]/p":           "[::1]:443",
		"http://127.0.0.1:5555/pay": "127.0.0.1:5555",
	} {
		u, err := url.Parse(in)
		require.NoError(t, err)
		require.Equal(t, want, budgetHost(u), in)
	}
}

// An unsent retry gives its token back: a call whose context ends during
// the backoff wait.
func TestRetryBudgetUndoOnCancelledWait(t *testing.T) {
	tr, clk, srv := memScenario(t, &Options{MaxAttempts: 3, RetryBudget: RetryBudget{Burst: 2}},
		func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusServiceUnavailable) })
	ctx, cancel := context.WithCancel(context.Background())
	clk.onSleep = func(time.Duration) { cancel() }
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("undo", 1)).WithContext(ctx)
	_, err := tr.RoundTrip(req)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, srv.count())
	require.Equal(t, 2.0, tr.budget.available(strings.TrimPrefix(srv.URL, "http://")), "the token came back")
}
