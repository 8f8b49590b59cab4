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
