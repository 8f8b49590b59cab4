// Tests for WithOperationID: one operation ID, one key and one journal record,
// across calls, concurrent calls and KeyTTL.

package idem

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

func TestWithOperationIDSequentialCallsReplay(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-4827/charge")

	var bodies []string
	for i, replayed := range []string{"", "true"} {
		req, _ := paymentRequest(t, ctx, srv.URL, "order-4827", 1250)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err, "call %d", i+1)
		bodies = append(bodies, string(drain(t, resp)))
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Equal(t, replayed, resp.Header.Get("Idempotent-Replayed"), "call %d", i+1)
	}
	require.Equal(t, bodies[0], bodies[1], "the second call gets the stored payment")

	rec := onlyRecordIn(t, j)
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, "order-4827/charge", rec.OperationID)
	require.Len(t, wire.sent(), 2)
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, 1, srv.Ledger().Effects["order-4827"])
}

func TestWithOperationIDConcurrentCallsCollapse(t *testing.T) {
	t.Parallel()
	srv, wire := startPayments(t, nil), newWireLog(t)
	// The first request to arrive is answered late, so the others are sure to
	// be waiting while it runs.
	srv.Script(testserver.Fault{Kind: testserver.FaultSlowResponse, Delay: 50 * time.Millisecond})
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-77/charge")

	const calls = 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	replays := make(chan string, calls)
	for range calls {
		wg.Go(func() {
			<-start
			req, _ := paymentRequest(t, ctx, srv.URL, "order-77", 4200)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("status %d", resp.StatusCode)
			}
			replays <- resp.Header.Get("Idempotent-Replayed")
		})
	}
	close(start)
	wg.Wait()
	close(replays)
	var first, replayed int
	for r := range replays {
		if r == "true" {
			replayed++
		} else {
			first++
		}
	}
	require.Equal(t, 1, first, "one call ran the operation")
	require.Equal(t, calls-1, replayed, "the others got its stored result")

	rec := onlyRecordIn(t, j)
	require.Equal(t, StateSettled, rec.State)
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, 1, srv.Ledger().Effects["order-77"])
}

func TestWithOperationIDSettledPastKeyTTL(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	j := memStore(t)
	tr, clk := transportOver(t, j, Options{KeyTTL: time.Hour}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-9/charge")

	req, _ := paymentRequest(t, ctx, srv.URL, "order-9", 900)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	rec := onlyRecordIn(t, j)

	// The server may have forgotten the key by now: a resend could pay twice.
	clk.Advance(time.Hour + time.Minute)
	req, body := paymentRequest(t, ctx, srv.URL, "order-9", 900)
	resp, err = tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrAlreadySettled)
	var settled *AlreadySettledError
	require.ErrorAs(t, err, &settled)
	require.Equal(t, "order-9/charge", settled.OperationID)
	require.Equal(t, rec.Key, settled.Key)
	require.Equal(t, http.StatusCreated, settled.Status)
	require.EqualValues(t, 1, body.closes.Load())

	require.Len(t, wire.sent(), 1, "nothing sent")
	require.Equal(t, 1, srv.Ledger().Requests)
	require.Equal(t, StateSettled, onlyRecordIn(t, j).State)
}

func TestWithOperationIDPendingPastKeyTTL(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	srv.Script(status503, status503)
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{KeyTTL: time.Hour, MaxAttempts: 2}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-10/charge")

	req, _ := paymentRequest(t, ctx, srv.URL, "order-10", 1000)
	_, err := tr.RoundTrip(req)
	perr := pendingErr(t, err)

	clk.Advance(time.Hour + time.Minute)
	var outs []Outcome
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 1)
	require.Nil(t, outs[0].Response)
	require.ErrorIs(t, outs[0].Err, ErrKeyExpired)
	require.Equal(t, perr.Key, outs[0].Record.Key)
	require.Equal(t, StateExpired, outs[0].Record.State)

	rec, err := j.Lookup("order-10/charge")
	require.NoError(t, err)
	require.Equal(t, StateExpired, rec.State)
	require.Len(t, wire.sent(), 2, "nothing sent once expired")
	require.Equal(t, 2, srv.Ledger().Requests)

	// Not resumed again, and a new call under the same ID is refused too.
	outs = nil
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) { outs = append(outs, o) }))
	require.Empty(t, outs)
	req, body := paymentRequest(t, ctx, srv.URL, "order-10", 1000)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrKeyExpired)
	require.False(t, errors.Is(err, ErrAlreadySettled))
	require.EqualValues(t, 1, body.closes.Load())
	require.Len(t, wire.sent(), 2)
}

func TestWithOperationIDDifferentRequestRefused(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-11/charge")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-11", 1100)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)

	other := map[string]func() *http.Request{
		"another amount": func() *http.Request { r, _ := paymentRequest(t, ctx, srv.URL, "order-11", 1101); return r },
		"another URL": func() *http.Request {
			r, _ := paymentRequest(t, ctx, srv.URL+"/v2", "order-11", 1100)
			return r
		},
		"another method": func() *http.Request {
			r, _ := paymentRequest(t, ctx, srv.URL, "order-11", 1100)
			r.Method = http.MethodPatch
			return r
		},
		"another caller key": func() *http.Request {
			r, _ := paymentRequest(t, ctx, srv.URL, "order-11", 1100)
			r.Header.Set("Idempotency-Key", "not-the-journaled-one")
			return r
		},
	}
	for name, build := range other {
		resp, err := tr.RoundTrip(build())
		require.Nil(t, resp, name)
		require.ErrorIs(t, err, ErrKeyReuse, name)
	}
	require.Len(t, wire.sent(), 1)
	require.Equal(t, 1, srv.Ledger().Requests)
}

func TestS18_HoldThen409ThenReplay(t *testing.T) {
	t.Parallel()
	srv := startPayments(t, nil)
	// The hold lasts until the test releases it.
	srv.Script(testserver.Fault{Kind: testserver.FaultHold, Delay: time.Minute})
	wire := newWireLog(t)
	j, _ := testJournal(t)
	// The first attempt is held until its timeout, so it ends at 1.5 s; every
	// other attempt has the same 1.5 s to reach the server, however loaded
	// the machine.
	tr, clk := transportOn(t, j, Options{AttemptTimeout: 1500 * time.Millisecond, MaxAttempts: 40,
		InitialInterval: 100 * time.Millisecond}, wire, time.Time{})
	// Waits are the fake clock's and take no real time. Once a retry has met
	// 409, the test ends the hold and lets the held request finish its
	// payment before the next attempt, which then gets the stored result.
	var release sync.Once
	clk.onSleep = func(time.Duration) {
		if srv.Ledger().InProgress == 0 {
			return
		}
		release.Do(func() {
			srv.ReleaseHolds()
			eventually(t, 10*time.Second, func() bool { return srv.Ledger().Effects["order-s18"] == 1 },
				"the held request made its payment")
		})
	}

	ctx := WithOperationID(context.Background(), "charge/order-s18")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-s18", 1250)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	stored := drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), "the retry got the stored result")
	require.GreaterOrEqual(t, time.Since(start), 1200*time.Millisecond, "the result exists only once the hold ends")

	l := srv.Ledger()
	require.Equal(t, 1, l.Effects["order-s18"])
	require.GreaterOrEqual(t, l.InProgress, 1, "a retry met 409")
	require.GreaterOrEqual(t, l.Replays, 1)
	rec, err := j.Lookup("charge/order-s18")
	require.NoError(t, err)
	require.Equal(t, StateSettled, rec.State)
	require.GreaterOrEqual(t, rec.Attempts, 3)
	require.Equal(t, l.Requests, len(wire.sent()))
	wire.requireOneKey(t, rec.Key)
	require.Contains(t, string(stored), `"reference":"order-s18"`)

	// After a restart the app rebuilds the request with another amount under
	// the same operation ID: refused before anything is sent.
	j2 := reopen(t, j)
	tr2, _ := transportOn(t, j2, Options{}, wire, clk.Now())
	req2, body2 := paymentRequest(t, ctx, srv.URL, "order-s18", 9999)
	resp2, err := tr2.RoundTrip(req2)
	require.Nil(t, resp2)
	require.ErrorIs(t, err, ErrKeyReuse)
	require.EqualValues(t, 1, body2.closes.Load())
	require.Equal(t, l.Requests, srv.Ledger().Requests, "the server saw nothing new")
	require.Len(t, wire.sent(), l.Requests)
	after, err := j2.Lookup("charge/order-s18")
	require.NoError(t, err)
	require.Equal(t, rec.Key, after.Key)
	require.Equal(t, rec.BodySHA256, after.BodySHA256)
	require.Equal(t, StateSettled, after.State)
}

func TestRecallBeforeNextAttemptSendsNothing(t *testing.T) {
	t.Parallel()
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
