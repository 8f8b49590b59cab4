// Tests for how a call ends (settle.go): an operation that may have reached
// the server is never failed, one that cannot have is, a settled one is never
// downgraded, and a response a Classifier calls permanent still settles.

package idem

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

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
	t.Parallel()
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
	t.Parallel()
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

func TestPermanentClassOnResponseSettles(t *testing.T) {
	t.Parallel()
	// A Classifier may call a response ClassPermanent; the server answered, so
	// the answer is the outcome.
	classifier := func(a Attempt) Class {
		if a.Response != nil && a.Response.StatusCode == http.StatusBadRequest {
			return ClassPermanent
		}
		return DefaultClassifier(a)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			tr, _, srv := newScenario(t, &Options{Classifier: classifier}, func(_ int, w http.ResponseWriter, _ *http.Request) {
				reply(w, http.StatusBadRequest)
			})
			var resp *http.Response
			var err error
			require.NotPanics(t, func() {
				resp, err = tr.RoundTrip(newRequest(t, method, srv.URL+"/payments", paymentBody("order-r5", 500)))
			})
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			require.Equal(t, http.StatusText(http.StatusBadRequest), string(drain(t, resp)))
			require.Equal(t, 1, srv.count())
			if method == http.MethodPost {
				rec := onlyRecord(t, tr)
				require.Equal(t, StateSettled, rec.State)
				require.Equal(t, http.StatusBadRequest, rec.Status)
			}
		})
	}
}
