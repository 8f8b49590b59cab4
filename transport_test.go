// Tests for Transport's RoundTripper contract (transport.go): the caller's
// request is not modified, an odd base neither panics nor loses the call, a
// canceled context journals nothing, "" is GET, and one Transport serves many
// goroutines at once (field scenario S23).

package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

func TestNilHeaderMapJournaled(t *testing.T) {
	t.Parallel()
	tr, _, srv := newScenario(t, nil, created)
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r7", 700))
	req.Header = nil
	var resp *http.Response
	var err error
	require.NotPanics(t, func() { resp, err = tr.RoundTrip(req) })
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, onlyRecord(t, tr).Key, sameKey(t, srv.requests()))
	require.Nil(t, req.Header, "the caller's request is not modified")
}

func TestBrokenBaseNoPanic(t *testing.T) {
	t.Parallel()
	t.Run("nil response and nil error", func(t *testing.T) {
		j, _ := testJournal(t)
		base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
		tr, _ := transportOn(t, j, Options{MaxAttempts: 2}, base, time.Time{})
		var resp *http.Response
		var err error
		require.NotPanics(t, func() {
			resp, err = tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1:1/payments", paymentBody("order-r11", 1100)))
		})
		require.Nil(t, resp)
		require.Error(t, err)
		require.Equal(t, 2, pendingErr(t, err).Attempts)
	})
	t.Run("response with nil Body", func(t *testing.T) {
		j, _ := testJournal(t)
		var n atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp := synthetic(r, http.StatusServiceUnavailable) // discarded: drained and closed
			if n.Add(1) > 1 {
				resp = synthetic(r, http.StatusCreated)
			}
			resp.Body = nil
			return resp, nil
		})
		tr, _ := transportOn(t, j, Options{}, base, time.Time{})
		require.NotPanics(t, func() {
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1:1/payments", paymentBody("order-r11", 1100)))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Empty(t, drain(t, resp))
		})
		require.EqualValues(t, 2, n.Load())
		require.Equal(t, StateSettled, onlyRecordOf(t, j).State)
	})
}

func TestCanceledContextJournalsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr, _, srv := newScenario(t, nil, created)
	req, body := paymentRequest(t, ctx, srv.URL, "order-r15", 1500)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.As(err, new(*PendingError)), "nothing to resume")
	noRequests(t, tr, srv)
	require.EqualValues(t, 1, body.closes.Load())
}

func TestEmptyMethodIsGET(t *testing.T) {
	// "" means GET (net/http): idempotent, so not journaled, and retried
	// even when the connection fails after the request was written.
	tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1: // on a fresh connection, so net/http does not retry it itself
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case 2:
			reply(w, http.StatusServiceUnavailable)
		default:
			reply(w, http.StatusOK)
		}
	})
	req := newRequest(t, http.MethodGet, srv.URL+"/payments/p1", "")
	req.Method = ""
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, clk.Sleeps(), 2)

	recs, err := tr.bolt().Records()
	require.NoError(t, err)
	require.Empty(t, recs, "a GET is not journaled")
	seen := srv.requests()
	require.Len(t, seen, 3)
	for i, r := range seen {
		require.Equal(t, http.MethodGet, r.Method, "attempt %d", i+1)
		require.Empty(t, r.Header.Values(DefaultKeyHeader), "attempt %d", i+1)
	}
}

func TestS23_ConcurrentThousandOps(t *testing.T) {
	t.Parallel()
	const (
		ops         = 1000
		workers     = 50
		forced      = 3  // synthetic 503s every operation meets first
		maxAttempts = 14 // leaves 11 attempts for the server's random faults
	)
	// About one request in five faults at random: 503 and 429 (Retry-After: 1),
	// lost responses (committed, then reset) and dropped connections.
	plan, err := testserver.ParsePlan(23, "503=0.08,429=0.04,lost=0.05,drop=0.03")
	require.NoError(t, err)
	srv := startPayments(t, &testserver.Options{Plan: plan})

	// Every operation's first attempts get 503 before reaching the server, so
	// each one needs more than a few attempts of its own: a budget shared
	// between requests, or state leaking from one to another, would show.
	wire := newWireLog(t)
	var attempts sync.Map // key -> *atomic.Int32
	wire.intercept = func(r *http.Request, key string) (*http.Response, error) {
		n, _ := attempts.LoadOrStore(key, new(atomic.Int32))
		if n.(*atomic.Int32).Add(1) <= forced {
			return synthetic(r, http.StatusServiceUnavailable), nil
		}
		return nil, nil
	}
	j := fastJournal(t)
	// The retry budget is shared between requests by design, and three
	// forced 503s per operation would empty it: S23 is about each request's
	// own attempts, so it is off here (TestRetryBudgetConcurrentNothingLost
	// runs a concurrent faulty load with it on).
	tr, _ := transportOn(t, j, Options{MaxAttempts: maxAttempts, RetryBudget: RetryBudget{Disabled: true}}, wire, time.Time{})

	refs := make([]string, ops)
	for i := range refs {
		refs[i] = fmt.Sprintf("order-s23-%04d", i)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				req, body := paymentRequest(t, context.Background(), srv.URL, refs[i], 1+i)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Errorf("%s: %v", refs[i], err)
					continue
				}
				if resp.StatusCode != http.StatusCreated {
					t.Errorf("%s: status %d", refs[i], resp.StatusCode)
				}
				resp.Body.Close()
				if n := body.closes.Load(); n != 1 {
					t.Errorf("%s: body closed %d times", refs[i], n)
				}
			}
		})
	}
	for i := range ops {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	require.False(t, t.Failed())

	l := srv.Ledger()
	require.NoError(t, l.Check(refs))
	require.Equal(t, ops, l.Payments())
	require.Positive(t, l.Replays, "lost responses were replayed")

	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, ops)
	byRef := make(map[string]bool)
	for _, rec := range recs {
		require.Equal(t, StateSettled, rec.State, rec.Key)
		require.Equal(t, http.StatusCreated, rec.Status, rec.Key)
		n, ok := attempts.Load(rec.Key)
		require.True(t, ok, rec.Key)
		require.EqualValues(t, rec.Attempts, n.(*atomic.Int32).Load(), "attempts of %s", rec.Key)
		require.Greater(t, rec.Attempts, forced)
		require.LessOrEqual(t, rec.Attempts, maxAttempts)
		byRef[rec.URL+" "+rec.BodySHA256] = true
	}
	require.Len(t, byRef, ops, "one record per operation")

	// Every attempt carried one key, and each key always the same body.
	bodies := make(map[string]string)
	for _, a := range wire.sent() {
		require.Len(t, a.Keys, 1)
		if prev, ok := bodies[a.Keys[0]]; ok {
			require.Equal(t, prev, string(a.Body))
		}
		bodies[a.Keys[0]] = string(a.Body)
	}
	require.Len(t, bodies, ops)
}
