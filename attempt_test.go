// Tests for the attempt loop (attempt.go): cancellation ends a wait at once,
// a wait that would outlast the deadline is not started, a deadline shorter
// than one attempt ends the loop, every 429/503 counts as one of MaxAttempts,
// discarded responses are drained and closed (S08, S10-S12, S15); the
// Idem-Attempt header on every attempt, never in the journal or the
// fingerprint; a 421 Misdirected Request retried once on a new connection
// (RFC 9110 section 15.5.20). S24, jitter at the cap, is in retry_test.go.

package idem

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/leakcheck"
)

func always503(_ int, w http.ResponseWriter, _ *http.Request) {
	reply(w, http.StatusServiceUnavailable)
}

func TestS10_CancelDuringBackoff(t *testing.T) {
	leakcheck.Check(t)
	// Real clock: the first backoff wait is 5-15 s unless cancel wakes it.
	opts := &Options{InitialInterval: 10 * time.Second, MaxInterval: time.Minute}
	tr, _, srv := newScenario(t, opts, always503)
	clk := newSignalClock(realClock{})
	tr.clock = clk

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now() // before the cancel, so elapsed >= 100 ms whatever the load
	// The caller cancels at 100 ms, and in the backoff wait: on a loaded
	// machine the first attempt alone can take longer than 100 ms, so the
	// cancel waits for the wait to begin rather than for a fixed delay.
	go func() {
		select {
		case <-clk.sleeping:
			time.AfterFunc(time.Until(start.Add(100*time.Millisecond)), cancel)
		case <-ctx.Done():
		}
	}()
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
	elapsed := time.Since(start)

	require.Nil(t, resp)
	require.ErrorIs(t, err, context.Canceled)
	perr := pendingErr(t, err)
	require.GreaterOrEqual(t, elapsed, 100*time.Millisecond)
	// The shortest wait the backoff could draw is 5 s: returning well before
	// it means cancel woke the wait, however busy the machine.
	require.Less(t, elapsed, 4*time.Second, "cancel did not wake the wait")

	srv.Close() // waits for any attempt in flight; none can start after it
	require.Equal(t, 1, srv.count(), "no attempt after cancel")
	require.Equal(t, 1, perr.Attempts)

	rec := onlyRecord(t, tr)
	require.Equal(t, StatePending, rec.State)
	require.Equal(t, perr.Key, rec.Key)
	require.Equal(t, 1, rec.Attempts)
	require.NotEmpty(t, rec.Body, "a pending operation keeps its bytes for Resume")
}

func TestS11_WaitBeyondDeadline(t *testing.T) {
	t.Parallel()
	// beyondDeadline compares ctx.Deadline with the Transport's clock, so the
	// deadline is set on the fake clock's time (which started at real time).
	withDeadline := func(t *testing.T, clk *fakeClock, d time.Duration) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(d))
		t.Cleanup(cancel)
		return ctx
	}

	t.Run("Retry-After 10 s, deadline 5 s", func(t *testing.T) {
		tr, clk, srv := newScenario(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusServiceUnavailable, "Retry-After", "10")
		})
		ctx := withDeadline(t, clk, 5*time.Second)
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
		require.Less(t, time.Since(start), time.Second)
		require.Nil(t, resp)
		perr := pendingErr(t, err)
		require.Empty(t, clk.Sleeps(), "gave up only after sleeping")
		reqs := srv.requests()
		require.Len(t, reqs, 1)
		require.True(t, perr.NextAttempt.Equal(reqs[0].At.Add(10*time.Second)), "NextAttempt %v", perr.NextAttempt)
		require.Equal(t, StatePending, onlyRecord(t, tr).State)
	})

	t.Run("backoff 10 s or more, deadline 5 s", func(t *testing.T) {
		opts := &Options{InitialInterval: 20 * time.Second, MaxInterval: time.Minute}
		tr, clk, srv := newScenario(t, opts, always503)
		ctx := withDeadline(t, clk, 5*time.Second)
		_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
		pendingErr(t, err)
		require.Empty(t, clk.Sleeps())
		require.Equal(t, 1, srv.count())
	})

	t.Run("unjournaled: the last response, no sleep", func(t *testing.T) {
		tr, clk, srv := newScenario(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusServiceUnavailable, "Retry-After", "10")
		})
		ctx := withDeadline(t, clk, 5*time.Second)
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, "").WithContext(ctx))
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		drain(t, resp)
		require.Empty(t, clk.Sleeps())
		require.Equal(t, 1, srv.count())
	})

	t.Run("waits that fit are taken, the one that does not is not", func(t *testing.T) {
		tr, clk, srv := newScenario(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusServiceUnavailable, "Retry-After", "2")
		})
		ctx := withDeadline(t, clk, 5*time.Second)
		_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
		pendingErr(t, err)
		// At 0 s and 2 s a 2 s wait ends before the deadline; at 4 s it would not.
		require.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second}, clk.Sleeps())
		require.Equal(t, 3, srv.count())
	})
}

func TestS12_DeadlineShorterThanAttempt(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			leakcheck.Check(t)
			// Tiny waits: were the loop to go on after the deadline, it would
			// burst attempts.
			opts := &Options{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxAttempts: 100}
			arrived := make(chan struct{}, 1)
			tr, clk, srv := newScenario(t, opts, func(_ int, w http.ResponseWriter, r *http.Request) {
				select {
				case arrived <- struct{}{}:
				default:
				}
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
				reply(w, http.StatusServiceUnavailable)
			})

			// The deadline is 30 ms away on the Transport's clock and passes
			// while the first attempt is at the server: a real 30 ms timer
			// could pass before a loaded machine sent the attempt at all.
			ctx := newManualDeadline(t, clk.Now().Add(30*time.Millisecond))
			go func() {
				select {
				case <-arrived:
					ctx.pass()
				case <-ctx.Done():
				}
			}()
			start := time.Now()
			resp, err := tr.RoundTrip(newRequest(t, method, srv.URL, payload).WithContext(ctx))
			elapsed := time.Since(start)

			require.Nil(t, resp)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Less(t, elapsed, time.Second)
			srv.Close() // waits for any attempt in flight; none can start after it
			require.Equal(t, 1, srv.count(), "attempts after the deadline")
			if method == http.MethodPost {
				perr := pendingErr(t, err)
				require.Equal(t, 1, perr.Attempts)
				require.Equal(t, StatePending, onlyRecord(t, tr).State)
			}
		})
	}
}

func TestS15_AlwaysUnavailable(t *testing.T) {
	t.Parallel()
	// 503 and 429 alternate: each counts as an attempt.
	unavailable := func(n int, w http.ResponseWriter, _ *http.Request) {
		if n%2 == 0 {
			reply(w, http.StatusTooManyRequests)
			return
		}
		reply(w, http.StatusServiceUnavailable)
	}
	for _, n := range []int{1, 3, 6} {
		lastStatus := http.StatusServiceUnavailable
		if n%2 == 0 {
			lastStatus = http.StatusTooManyRequests
		}
		t.Run(fmt.Sprintf("POST/MaxAttempts=%d", n), func(t *testing.T) {
			tr, clk, srv := newScenario(t, &Options{MaxAttempts: n}, unavailable)
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
			require.Nil(t, resp)
			perr := pendingErr(t, err)
			require.Equal(t, n, srv.count())
			require.Equal(t, n, perr.Attempts)
			require.Equal(t, lastStatus, perr.LastStatus)
			require.Len(t, clk.Sleeps(), n-1, "no sleep after the last attempt")
			sameKey(t, srv.requests())

			rec := onlyRecord(t, tr)
			require.Equal(t, StatePending, rec.State)
			require.Equal(t, n, rec.Attempts)
		})
		t.Run(fmt.Sprintf("GET/MaxAttempts=%d", n), func(t *testing.T) {
			tr, clk, srv := newScenario(t, &Options{MaxAttempts: n}, unavailable)
			resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
			require.NoError(t, err)
			require.Equal(t, lastStatus, resp.StatusCode)
			require.Equal(t, http.StatusText(lastStatus), string(drain(t, resp)), "the last body is the caller's to read")
			require.Equal(t, n, srv.count())
			require.Len(t, clk.Sleeps(), n-1)
			recs, err := tr.bolt().Records()
			require.NoError(t, err)
			require.Empty(t, recs, "GET is not journaled")
		})
	}
}

func TestS08_DiscardedBodiesDrained(t *testing.T) {
	leakcheck.Check(t)
	filler := strings.Repeat("x", 1<<10) // below the drain bound: the connection can be reused
	// S08 is about connections, not durability: an in-memory journal spares
	// the fsyncs that would make 1,000 journaled calls take seconds under -race.
	tr, clk, srv := memScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, filler)
			return
		}
		reply(w, http.StatusCreated)
	})
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
	after := leakcheck.Wait(goroutines+2, 2*time.Second)
	require.LessOrEqual(t, after, goroutines+2, "goroutines grew from %d", goroutines)

	recs, err := listRecords(tr.journal)
	require.NoError(t, err)
	require.Len(t, recs, calls+1)
	for _, rec := range recs {
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, 3, rec.Attempts)
	}
}

func TestAttemptHeaderCountsAttemptsWithoutChangingTheOperation(t *testing.T) {
	t.Parallel()
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 4}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n < 3 {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	ctx := WithOperationID(context.Background(), "order-9/charge")
	req := newRequest(t, http.MethodPost, srv.URL, `{"amount":5}`)
	req.Header.Set(AttemptHeader, "attempt=99; max=99") // the caller's is replaced
	resp, err := tr.RoundTrip(req.WithContext(ctx))
	require.NoError(t, err)
	drain(t, resp)

	reqs := srv.requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		require.Equal(t, []string{[]string{"attempt=1; max=4", "attempt=2; max=4", "attempt=3; max=4"}[i]},
			r.Header.Values(AttemptHeader))
		sameBytes(t, reqs[0].Body, r.Body, "attempt %d", i+1)
	}
	sameKey(t, reqs)

	// Not journaled, so not part of the fingerprint: calling again with the
	// same operation ID and body is the same operation, not ErrKeyReuse.
	rec := onlyRecord(t, tr)
	require.Empty(t, rec.Header.Values(AttemptHeader))
	resp, err = tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"amount":5}`).WithContext(ctx))
	require.NoError(t, err)
	drain(t, resp)
	sameKey(t, srv.requests())

	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(AttemptHeader)), "the attempt header is never journaled")
	require.False(t, bytes.Contains(raw, []byte("attempt=")))
}

func TestAttemptHeaderOnResumeAndUnjournaled(t *testing.T) {
	tr, clk, srv := memScenario(t, &Options{MaxAttempts: 2}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			reply(w, http.StatusBadGateway)
			return
		}
		reply(w, http.StatusOK)
	})
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	pe := pendingErr(t, err)
	clk.Advance(pe.NextAttempt.Sub(clk.Now()))
	require.NoError(t, tr.Resume(context.Background(), nil))
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	drain(t, resp)

	var got []string
	for _, r := range srv.requests() {
		got = append(got, r.Header.Get(AttemptHeader))
	}
	// Two attempts in the call, one in Resume (it counts from 1 again), one GET.
	require.Equal(t, []string{"attempt=1; max=2", "attempt=2; max=2", "attempt=1; max=2", "attempt=1; max=2"}, got)
}

func TestDisableAttemptHeader(t *testing.T) {
	tr, _, srv := memScenario(t, &Options{DisableAttemptHeader: true}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusCreated)
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	require.NoError(t, err)
	drain(t, resp)
	require.Empty(t, srv.requests()[0].Header.Values(AttemptHeader))

	// A GET then has no header to add: its attempt shares the caller's header map,
	// which must come through unchanged, and a nil one must still be sent.
	get := newRequest(t, http.MethodGet, srv.URL, "")
	get.Header.Set("X-Request-Id", "r-1")
	resp, err = tr.RoundTrip(get)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.Header{"X-Request-Id": {"r-1"}}, get.Header, "the caller's header is unchanged")
	require.Equal(t, "r-1", srv.requests()[1].Header.Get("X-Request-Id"))
	get.Header = nil
	resp, err = tr.RoundTrip(get)
	require.NoError(t, err, "a nil header map is sent as an empty one")
	drain(t, resp)
	require.Len(t, srv.requests(), 3)
}

// The values made once at start are the ones formatted on demand, inside the
// table and beyond it.
func TestAttemptHeaderTable(t *testing.T) {
	for maxN := 0; maxN <= len(attemptHeaders)+2; maxN++ {
		for n := 0; n <= maxN+1; n++ {
			want := "attempt=" + strconv.Itoa(n) + "; max=" + strconv.Itoa(maxN)
			require.Equal(t, want, attemptHeader(n, maxN))
		}
	}
}

func TestMisdirectedRetriedOnNewConnection(t *testing.T) {
	t.Parallel()
	type wrapped struct{ *http.Transport } // a base idem cannot clone
	for _, tc := range []struct {
		name string
		h2   bool
		wrap bool
	}{
		{"HTTP/1.1", false, false},
		{"HTTP/2", true, false},
		{"HTTP/1.1 through a wrapping base", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns, requests atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if requests.Add(1) == 1 {
					reply(w, http.StatusMisdirectedRequest)
					return
				}
				reply(w, http.StatusCreated)
			}))
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.EnableHTTP2 = tc.h2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			var base http.RoundTripper = tlsBase(t, roots)
			if tc.wrap {
				base = wrapped{base.(*http.Transport)}
			}

			var mu sync.Mutex
			var got []Attempt
			tr, _ := memTransport(t, &Options{Base: base, Classifier: func(a Attempt) Class {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, a)
				return DefaultClassifier(a)
			}})
			var gotConns []httptrace.GotConnInfo
			trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
				mu.Lock()
				defer mu.Unlock()
				gotConns = append(gotConns, i)
			}}
			req := newRequest(t, http.MethodPost, srv.URL, payload)
			req = req.WithContext(httptrace.WithClientTrace(context.Background(), trace))
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)
			if tc.h2 {
				require.Equal(t, 2, resp.ProtoMajor)
			}

			rec := onlyRecordIn(t, tr.journal)
			require.Equal(t, StateSettled, rec.State)
			require.Equal(t, 2, rec.Attempts)
			require.Equal(t, int64(2), requests.Load(), "net/http does not retry a 421 itself; idem retries it once")
			require.Equal(t, int64(2), conns.Load(), "the retry came on a connection of its own")

			mu.Lock()
			defer mu.Unlock()
			require.Len(t, got, 2)
			require.False(t, got[0].Misdirected)
			require.True(t, got[1].Misdirected)
			require.Equal(t, []int{1, 2}, []int{got[0].N, got[1].N})
			require.Len(t, gotConns, 2)
			require.False(t, gotConns[1].Reused, "the second attempt dialed a new connection")
			require.NotSame(t, gotConns[0].Conn, gotConns[1].Conn)
		})
	}
}

func TestMisdirectedTwiceIsFinal(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusMisdirectedRequest)
		}))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		t.Cleanup(srv.Close)
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		tr, clk := memTransport(t, &Options{Base: tlsBase(t, roots)})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
		require.NoError(t, err)
		require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
		require.Equal(t, http.StatusText(http.StatusMisdirectedRequest), string(drain(t, resp)), "the second 421 is the caller's")
		rec := onlyRecordIn(t, tr.journal)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, http.StatusMisdirectedRequest, rec.Status)
		require.Equal(t, 2, rec.Attempts)
		require.Len(t, clk.Sleeps(), 1)
	}
}

// An unjournaled GET under the DefaultClassifier, with no Observer or Logger,
// is sent without a trace: written or not, a failed attempt is retried. With
// a Classifier of the caller's, each attempt is traced and Wrote says
// whether the headers were written.
func TestTraceOnlyWhereWroteMatters(t *testing.T) {
	ok := func(r *http.Request) *http.Response {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}
	}
	t.Run("untraced GET", func(t *testing.T) {
		var calls int
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			require.Nil(t, httptrace.ContextClientTrace(r.Context()))
			if calls == 1 {
				return nil, io.ErrUnexpectedEOF // after writing, maybe
			}
			return ok(r), nil
		})
		tr, _ := memTransport(t, &Options{Base: base})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://127.0.0.1/payments", ""))
		require.NoError(t, err)
		require.Equal(t, 2, calls, "retried: the method is idempotent")
		info, found := ResponseInfo(resp)
		require.True(t, found)
		require.False(t, info.Journaled)
		resp.Body.Close()
	})
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run("classifier "+method, func(t *testing.T) {
			var seen []bool
			classify := func(a Attempt) Class {
				seen = append(seen, a.Wrote)
				return DefaultClassifier(a)
			}
			var calls int
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				calls++
				trace := httptrace.ContextClientTrace(r.Context())
				require.NotNil(t, trace)
				switch calls {
				case 1:
					return nil, errors.New("refused before writing")
				case 2:
					trace.WroteHeaders()
					return nil, io.ErrUnexpectedEOF
				}
				trace.WroteHeaders()
				return ok(r), nil
			})
			tr, _ := memTransport(t, &Options{Base: base, Classifier: classify})
			resp, err := tr.RoundTrip(newRequest(t, method, "http://127.0.0.1/payments", "{}"))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, []bool{false, true, true}, seen)
		})
	}
}

// An attempt's context lives until the caller closes the response body, as
// net/http.Client's does under its Timeout, and then ends: the caller's
// context no longer holds on to it.
func TestAttemptContextEndsWithBody(t *testing.T) {
	var actx context.Context
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		actx = r.Context()
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	tr, _ := memTransport(t, &Options{Base: base})
	caller, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://127.0.0.1/payments", "").WithContext(caller))
	require.NoError(t, err)
	require.NoError(t, actx.Err(), "alive while the body is read")
	tr.watch.mu.Lock()
	require.Empty(t, tr.watch.heap, "the attempt timeout ends with the response headers")
	tr.watch.mu.Unlock()
	require.Same(t, actx, resp.Request.Context())
	resp.Body.Close()
	require.ErrorIs(t, actx.Err(), context.Canceled)
	require.NoError(t, caller.Err())
}
