// Regression tests for defects found in review, about an operation's life:
// Resume never runs a call in flight, an operation that may have reached the
// server is never failed, a settled one is never downgraded, re-calls honour
// NextAttempt, Resume never sends without the credentials it dropped, and
// records are kept for at least KeyTTL. regressions_requests_test.go holds the ones about
// single requests.

package idem

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// gate holds server handlers until the test opens it. Register
// t.Cleanup(g.open) after starting the server, so that a failing test opens
// it before the server's Close waits for its handlers.
type gate struct {
	ch   chan struct{}
	open func()
}

func newGate() *gate {
	ch := make(chan struct{})
	return &gate{ch: ch, open: sync.OnceFunc(func() { close(ch) })}
}

// roundTripResult is what a RoundTrip run by roundTripAsync returned.
type roundTripResult struct {
	resp *http.Response
	err  error
}

// roundTripAsync runs tr.RoundTrip(req) in a goroutine.
func roundTripAsync(tr *Transport, req *http.Request) <-chan roundTripResult {
	done := make(chan roundTripResult, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- roundTripResult{resp, err}
	}()
	return done
}

// resumeAll runs tr.Resume and returns the outcomes it reported, each
// response body read and closed (fn runs off the test goroutine, so no
// require in it).
func resumeAll(tb testing.TB, tr *Transport) []Outcome {
	tb.Helper()
	var outs []Outcome
	require.NoError(tb, tr.Resume(context.Background(), func(o Outcome) {
		if o.Response != nil {
			io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
		}
		outs = append(outs, o)
	}))
	return outs
}

// pastNextAttempt moves clk just past the record's earliest next attempt.
func pastNextAttempt(clk *fakeClock, next time.Time) {
	clk.Advance(next.Sub(clk.Now()) + time.Millisecond)
}

func TestResumeSkipsInFlightAnonymousCall(t *testing.T) {
	// A POST with neither operation ID nor caller key: its lock and its
	// record once used two different minted keys, so Resume sent it again.
	g := newGate()
	tr, _, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			<-g.ch
		}
		reply(w, http.StatusCreated)
	})
	t.Cleanup(g.open)

	done := roundTripAsync(tr, newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r1", 100)))
	require.Eventually(t, func() bool { return srv.count() == 1 }, time.Second, time.Millisecond)
	require.Equal(t, StatePending, onlyRecord(t, tr).State)

	require.Empty(t, resumeAll(t, tr), "Resume must skip a call in flight in this process")
	require.Equal(t, 1, srv.count())

	g.open()
	res := <-done
	require.NoError(t, res.err)
	drain(t, res.resp)
	require.Equal(t, http.StatusCreated, res.resp.StatusCode)
	require.Equal(t, StateSettled, onlyRecord(t, tr).State)
	require.Equal(t, 1, srv.count(), "one operation, one request")
}

func TestResumeSkipsCallerKeyCallOnOperationRecord(t *testing.T) {
	// The record belongs to operation "op-r2"; a later call finds it by its
	// caller key alone. Resume locks by operation ID, so the call must too.
	const key = "caller-key-r2"
	g := newGate()
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			reply(w, http.StatusServiceUnavailable)
		case 2:
			<-g.ch
			reply(w, http.StatusCreated)
		default:
			reply(w, http.StatusCreated)
		}
	})
	t.Cleanup(g.open)
	call := func(ctx context.Context) *http.Request {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
			strings.NewReader(paymentBody("order-r2", 200)))
		require.NoError(t, err)
		req.Header.Set(DefaultKeyHeader, key)
		return req
	}

	_, err := tr.RoundTrip(call(WithOperationID(context.Background(), "op-r2")))
	perr := pendingErr(t, err)
	pastNextAttempt(clk, perr.NextAttempt)

	done := roundTripAsync(tr, call(context.Background()))
	require.Eventually(t, func() bool { return srv.count() == 2 }, time.Second, time.Millisecond)
	require.Empty(t, resumeAll(t, tr), "Resume must skip the operation while a call runs it")
	require.Equal(t, 2, srv.count())

	g.open()
	res := <-done
	require.NoError(t, res.err)
	drain(t, res.resp)
	require.Equal(t, http.StatusCreated, res.resp.StatusCode)
	rec := onlyRecord(t, tr)
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, "op-r2", rec.OperationID)
	require.Equal(t, key, sameKey(t, srv.requests()))
	require.Equal(t, 2, srv.count())
}

// certOnAttempts returns a wireLog that fails attempt n (counted from 1) with
// an untrusted-certificate error when fail(n), and sends the others.
func certOnAttempts(tb testing.TB, fail func(n int64) bool) *wireLog {
	wire := newWireLog(tb)
	var n atomic.Int64
	wire.intercept = func(*http.Request, string) (*http.Response, error) {
		if fail(n.Add(1)) {
			return nil, x509.UnknownAuthorityError{}
		}
		return nil, nil
	}
	return wire
}

func TestMaybeSentOperationNeverFailed(t *testing.T) {
	// Attempt 1 creates the payment but its response is lost; attempt 2
	// fails on a certificate. The server has acted: pending, not failed.
	srv := startPayments(t, nil)
	srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
	wire := certOnAttempts(t, func(n int64) bool { return n == 2 })
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{}, wire, time.Time{})

	req, _ := paymentRequest(t, WithOperationID(context.Background(), "op-r3"), srv.URL, "order-r3", 300)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.NotErrorIs(t, err, ErrPermanent)
	perr := pendingErr(t, err)
	require.Equal(t, 2, perr.Attempts)
	rec, err := j.Lookup("op-r3")
	require.NoError(t, err)
	require.Equal(t, StatePending, rec.State)

	require.Empty(t, resumeAll(t, tr), "not before its next attempt")
	pastNextAttempt(clk, perr.NextAttempt)
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	require.Equal(t, "true", outs[0].Response.Header.Get("Idempotent-Replayed"))

	rec, err = j.Lookup("op-r3")
	require.NoError(t, err)
	require.Equal(t, StateSettled, rec.State)
	require.Len(t, wire.sent(), 3)
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, map[string]int{"order-r3": 1}, srv.Ledger().Effects)
}

func TestFreshOperationCertErrorFailsThenRecallCanPend(t *testing.T) {
	// The contrast: a first attempt that fails on a certificate cannot have
	// reached the server, so the operation is failed. Re-called, it may
	// reach the server; left unknown then, it must be pending for Resume.
	srv := startPayments(t, nil)
	var certFail atomic.Bool
	certFail.Store(true)
	wire := certOnAttempts(t, func(int64) bool { return certFail.Load() })
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{MaxAttempts: 1}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "op-r6")

	req, _ := paymentRequest(t, ctx, srv.URL, "order-r6", 600)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrPermanent)
	require.False(t, errors.As(err, new(*PendingError)), "a failure before sending is not pending")
	rec, err := j.Lookup("op-r6")
	require.NoError(t, err)
	require.Equal(t, StateFailed, rec.State)
	require.NotEmpty(t, rec.LastError)
	require.Zero(t, srv.Ledger().Requests)

	certFail.Store(false)
	srv.Script(testserver.Fault{Kind: testserver.FaultDropBefore})
	req, _ = paymentRequest(t, ctx, srv.URL, "order-r6", 600)
	_, err = tr.RoundTrip(req)
	perr := pendingErr(t, err)
	rec, err = j.Lookup("op-r6")
	require.NoError(t, err)
	require.Equal(t, StatePending, rec.State, "re-sent with an unknown outcome: Resume must take it")

	pastNextAttempt(clk, perr.NextAttempt)
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	require.Equal(t, map[string]int{"order-r6": 1}, srv.Ledger().Effects)
}

func TestSettledOperationNeverDowngraded(t *testing.T) {
	srv := startPayments(t, nil)
	var certFail atomic.Bool
	wire := certOnAttempts(t, func(int64) bool { return certFail.Load() })
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "op-r4")
	call := func() (*http.Response, error) {
		req, _ := paymentRequest(t, ctx, srv.URL, "order-r4", 400)
		return tr.RoundTrip(req)
	}
	settledAs := func(status int) {
		t.Helper()
		rec, err := j.Lookup("op-r4")
		require.NoError(t, err)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, status, rec.Status)
	}

	resp, err := call()
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	settledAs(http.StatusCreated)

	// Within KeyTTL the call is re-sent; a certificate error then says
	// nothing about the stored outcome.
	certFail.Store(true)
	resp, err = call()
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrAlreadySettled)
	require.NotErrorIs(t, err, ErrPermanent)
	settledAs(http.StatusCreated)

	// Past KeyTTL nothing is sent, whatever the base would do.
	certFail.Store(false)
	clk.Advance(DefaultKeyTTL + time.Minute)
	sent := len(wire.sent())
	resp, err = call()
	require.Nil(t, resp)
	var settled *AlreadySettledError
	require.ErrorAs(t, err, &settled)
	require.Equal(t, http.StatusCreated, settled.Status)
	require.Len(t, wire.sent(), sent, "nothing sent past KeyTTL")
	settledAs(http.StatusCreated)
	require.Equal(t, map[string]int{"order-r4": 1}, srv.Ledger().Effects)
}

func TestResumeRefusesWithoutDroppedCredentials(t *testing.T) {
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r13", 1300))
	req.Header.Set("Authorization", "Bearer tok-r13")
	_, err := tr.RoundTrip(req)
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt)

	outs := resumeAll(t, tr) // no PrepareResume
	require.Len(t, outs, 1)
	require.ErrorIs(t, outs[0].Err, ErrSensitiveHeaderMissing)
	require.Nil(t, outs[0].Response)
	require.Equal(t, 1, srv.count(), "Resume sent nothing without the credentials")
	require.Equal(t, StatePending, onlyRecord(t, tr).State)

	tr2, err := NewTransport(tr.bolt(), &Options{Base: srv.base(), PrepareResume: func(r *http.Request) error {
		r.Header.Set("Authorization", "Bearer tok-r13")
		return nil
	}})
	require.NoError(t, err)
	tr2.clock = clk
	outs = resumeAll(t, tr2)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	require.Equal(t, StateSettled, onlyRecord(t, tr2).State)
	seen := srv.requests()
	require.Len(t, seen, 2)
	require.Equal(t, "Bearer tok-r13", seen[1].Header.Get("Authorization"))
}

func TestRecallBeforeNextAttemptSendsNothing(t *testing.T) {
	// 429 with a Retry-After past MaxRetryAfter: the server asked for an
	// hour, so a re-call within it is pending at once.
	tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			reply(w, http.StatusTooManyRequests, "Retry-After", "3600")
			return
		}
		reply(w, http.StatusCreated)
	})
	ctx := WithOperationID(context.Background(), "op-r14")
	call := func() (*http.Response, error) {
		return tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r14", 1400)).WithContext(ctx))
	}

	_, err := call()
	first := pendingErr(t, err)
	require.Equal(t, clk.Now().Add(time.Hour), first.NextAttempt)

	clk.Advance(30 * time.Minute)
	resp, err := call()
	require.Nil(t, resp)
	again := pendingErr(t, err)
	require.Equal(t, first.NextAttempt, again.NextAttempt)
	require.Equal(t, first.Key, again.Key)
	require.Equal(t, 1, srv.count(), "nothing sent before the server's time")

	clk.Advance(30*time.Minute + time.Second)
	resp, err = call()
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, 2, srv.count())
}

func TestRetentionBelowKeyTTLKeepsSettledOperation(t *testing.T) {
	// Open prunes with Retention; raised to KeyTTL, it must keep a record
	// whose key the server still replays, or the operation ID would mint a
	// second key and charge twice.
	srv, wire := startPayments(t, nil), newWireLog(t)
	j, path := testJournal(t)
	tr, _ := transportOn(t, j, Options{}, wire, time.Now().Add(-time.Hour))
	ctx := WithOperationID(context.Background(), "op-r16")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-r16", 1600)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.NoError(t, j.Close())

	c, err := Open(path, &Options{Journal: JournalOptions{Retention: time.Millisecond}, Base: wire})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	rec, err := c.Journal().Lookup("op-r16")
	require.NoError(t, err)
	require.NotNil(t, rec, "pruned within KeyTTL")
	require.Equal(t, StateSettled, rec.State)

	req, _ = paymentRequest(t, ctx, srv.URL, "order-r16", 1600)
	resp, err = c.HTTPClient().Do(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, map[string]int{"order-r16": 1}, srv.Ledger().Effects)
}
