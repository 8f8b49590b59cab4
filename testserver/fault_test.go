// fault_test.go observes each injected fault from a plain HTTP client: what the client sees,
// what the ledger recorded, and what a retry with the same key gets.

package testserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFaultStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  Fault
		status int
		ra     string
	}{
		{"503 seconds", Fault{Kind: FaultStatus, Status: 503, RetryAfter: "1"}, 503, "1"},
		{"429 date verbatim", Fault{Kind: FaultStatus, Status: 429, RetryAfter: "Sun, 06 Nov 1994 08:49:37 GMT"}, 429, "Sun, 06 Nov 1994 08:49:37 GMT"},
		{"429 RFC 850 date", Fault{Kind: FaultStatus, Status: 429, RetryAfter: "Sunday, 06-Nov-94 08:49:37 GMT"}, 429, "Sunday, 06-Nov-94 08:49:37 GMT"},
		{"500 garbage", Fault{Kind: FaultStatus, Status: 500, RetryAfter: "soon"}, 500, "soon"},
		{"negative", Fault{Kind: FaultStatus, Status: 503, RetryAfter: "-1"}, 503, "-1"},
		{"none", Fault{Kind: FaultStatus, Status: 502}, 502, ""},
		{"zero status", Fault{Kind: FaultStatus}, 503, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, nil)
			s.Script(tc.fault)
			a := post(t, s, "k", payBody("r", 1))
			require.Equal(t, tc.status, a.status)
			require.Equal(t, tc.ra, a.header.Get("Retry-After"))
			_, present := a.header["Retry-After"]
			require.Equal(t, tc.ra != "", present)
			require.Contains(t, string(a.body), "fault_injected")

			l := s.Ledger()
			require.Empty(t, l.Effects)
			require.Equal(t, map[string]int{tc.fault.ledgerName(): 1}, l.Faults)
			// Nothing registered: the retry is processed, not replayed.
			a = post(t, s, "k", payBody("r", 1))
			require.Equal(t, http.StatusCreated, a.status)
			require.Empty(t, a.header.Get(replayedHeader))
		})
	}
}

func TestFaultRetryAfterDate(t *testing.T) {
	s := newTestServer(t, nil)
	now := time.Date(2030, 5, 6, 7, 8, 9, 500e6, time.FixedZone("CEST", 2*3600))
	s.SetNow(func() time.Time { return now })
	s.Script(Fault{Kind: FaultStatus, Status: 429, RetryAfterDate: 2 * time.Second})
	a := post(t, s, "k", payBody("r", 1))
	require.Equal(t, http.StatusTooManyRequests, a.status)
	ra := a.header.Get("Retry-After")
	require.True(t, strings.HasSuffix(ra, " GMT"), ra)
	at, err := http.ParseTime(ra)
	require.NoError(t, err)
	require.Greater(t, at.Sub(now), time.Second-time.Nanosecond)
	require.LessOrEqual(t, at.Sub(now), 2*time.Second)
}

func TestFaultDropBefore(t *testing.T) {
	s := newTestServer(t, nil)
	s.Script(Fault{Kind: FaultDropBefore})
	postErr(t, s, "k", payBody("r", 1))
	l := s.Ledger()
	require.Empty(t, l.Effects)
	require.Equal(t, map[string]int{"drop": 1}, l.Faults)

	a := post(t, s, "k", payBody("r", 1))
	require.Equal(t, http.StatusCreated, a.status)
	require.Empty(t, a.header.Get(replayedHeader))
	require.Equal(t, map[string]int{"r": 1}, s.Ledger().Effects)
}

func TestFaultLostResponse(t *testing.T) {
	s := newTestServer(t, nil)
	s.Script(Fault{Kind: FaultLostResponse})
	postErr(t, s, "k", payBody("r", 1))
	l := s.Ledger()
	require.Equal(t, map[string]int{"r": 1}, l.Effects, "the payment was made")
	require.Equal(t, map[string]int{"lost": 1}, l.Faults)

	a := post(t, s, "k", payBody("r", 1))
	require.Equal(t, http.StatusCreated, a.status)
	require.Equal(t, "true", a.header.Get(replayedHeader))
	require.Equal(t, map[string]int{"r": 1}, s.Ledger().Effects)
}

func TestFaultSlowResponse(t *testing.T) {
	s := newTestServer(t, nil)
	s.Script(Fault{Kind: FaultSlowResponse, Delay: 2 * time.Second})
	_, err := do(t, postReq(t, s, "k", payBody("r", 1)), 100*time.Millisecond)
	require.Error(t, err)
	var timeout interface{ Timeout() bool }
	require.True(t, errors.As(err, &timeout) && timeout.Timeout(), "want a timeout, got %v", err)
	require.Equal(t, map[string]int{"r": 1}, s.Ledger().Effects)

	a := post(t, s, "k", payBody("r", 1))
	require.Equal(t, "true", a.header.Get(replayedHeader))

	// A patient client gets the answer after the delay.
	s.Script(Fault{Kind: FaultSlowResponse, Delay: 150 * time.Millisecond})
	start := time.Now()
	a = post(t, s, "k2", payBody("r2", 1))
	require.Equal(t, http.StatusCreated, a.status)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	require.Equal(t, 2, s.Ledger().Faults["slow"])
}

func TestFaultHold(t *testing.T) {
	s := newTestServer(t, nil)
	s.Script(Fault{Kind: FaultHold, Delay: 150 * time.Millisecond})
	start := time.Now()
	a := post(t, s, "k", payBody("r", 1))
	require.Equal(t, http.StatusCreated, a.status)
	require.Empty(t, a.header.Get(replayedHeader))
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	// A client that gives up during the hold does not stop the payment; its retry meets 409
	// until the hold ends, then the replay.
	s.Script(Fault{Kind: FaultHold, Delay: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	req := postReq(t, s, "k2", payBody("r2", 1)).WithContext(ctx)
	go func() {
		_, err := do(t, req, time.Minute)
		errc <- err
	}()
	waitHolding(t, s, 1)
	cancel()
	require.Error(t, <-errc)
	require.Equal(t, http.StatusConflict, post(t, s, "k2", payBody("r2", 1)).status)
	s.ReleaseHolds()
	// The effect is counted a moment before the result is stored; until then
	// the key is still in progress (409).
	require.Eventually(t, func() bool {
		return post(t, s, "k2", payBody("r2", 1)).header.Get(replayedHeader) == "true"
	}, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, s.Ledger().Effects["r2"])
}

func TestFaultResetBody(t *testing.T) {
	s := newTestServer(t, nil)
	s.Script(Fault{Kind: FaultResetBody})
	body := `{"amount": 1, "currency": "eur", "reference": "r", "pad": "` + strings.Repeat("x", 256<<10) + `"}`
	postErr(t, s, "k", body)
	l := s.Ledger()
	require.Empty(t, l.Effects)
	require.Equal(t, map[string]int{"reset": 1}, l.Faults)

	a := post(t, s, "k", body)
	require.Equal(t, http.StatusCreated, a.status)
	require.Empty(t, a.header.Get(replayedHeader))

	// A small body, read whole before the reset, fails the same way.
	s.Script(Fault{Kind: FaultResetBody})
	postErr(t, s, "k2", payBody("r2", 1))
	require.Zero(t, s.Ledger().Effects["r2"])
}

func TestFaultsOnReplay(t *testing.T) {
	s := newTestServer(t, nil)
	require.Equal(t, http.StatusCreated, post(t, s, "k", payBody("r", 1)).status)

	// A lost replay is lost; the next one arrives.
	s.Script(Fault{Kind: FaultLostResponse})
	postErr(t, s, "k", payBody("r", 1))
	require.Equal(t, "true", post(t, s, "k", payBody("r", 1)).header.Get(replayedHeader))

	// A hold on a replay does nothing and is not counted.
	s.Script(Fault{Kind: FaultHold, Delay: time.Minute})
	require.Equal(t, "true", post(t, s, "k", payBody("r", 1)).header.Get(replayedHeader))

	l := s.Ledger()
	require.Equal(t, map[string]int{"r": 1}, l.Effects)
	require.Equal(t, map[string]int{"lost": 1}, l.Faults)
	require.Equal(t, 3, l.Replays)
}

func TestFaultWithoutKey(t *testing.T) {
	s := newTestServer(t, nil)
	s.Script(Fault{Kind: FaultLostResponse})
	postErr(t, s, "", payBody("r", 1))
	require.Equal(t, http.StatusCreated, post(t, s, "", payBody("r", 1)).status)
	// Without a key a lost response plus a retry is a duplicate: what the ledger is for.
	l := s.Ledger()
	require.Equal(t, []string{"r"}, l.Duplicates())
	require.ErrorIs(t, l.Check([]string{"r"}), ErrNotExactlyOnce)
}

func TestPlanFaultsAndScriptOrder(t *testing.T) {
	plan, err := ParsePlan(1, "503=1")
	require.NoError(t, err)
	s := newTestServer(t, &Options{Plan: plan})
	s.Script(Fault{}, Fault{Kind: FaultStatus, Status: 429})

	require.Equal(t, http.StatusCreated, post(t, s, "a", payBody("a", 1)).status)
	require.Equal(t, http.StatusTooManyRequests, post(t, s, "b", payBody("b", 1)).status)
	a := post(t, s, "b", payBody("b", 1))
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, "1", a.header.Get("Retry-After"))

	// GET is never faulted.
	require.Equal(t, http.StatusOK, get(t, s, "/_ledger").status)
	require.Equal(t, map[string]int{"429": 1, "503 Retry-After=seconds": 1}, s.Ledger().Faults)
}
