// Tests for key expiry: an operation pending for longer than KeyTTL is never
// sent again; Resume reports it with ErrKeyExpired and a Record that holds
// what the caller needs to reconcile it (example_reconcile_test.go shows the
// recipe).

package idem

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

func TestKeyExpiryReportsWhatReconcilingNeeds(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	// The first attempt pays but its answer is lost; a resume half an hour
	// later meets 503. The outcome is unknown all along.
	srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse}, status503)
	j, _ := testJournal(t)
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tr, clk := transportOn(t, j, Options{KeyTTL: time.Hour, MaxAttempts: 1}, wire, t0)

	ctx := WithOperationID(context.Background(), "order-21/charge")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-21", 2100)
	req.Header.Set("X-Request-Source", "checkout")
	_, err := tr.RoundTrip(req)
	perr := pendingErr(t, err)

	clk.Advance(30 * time.Minute)
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	pendingErr(t, outs[0].Err)
	lastAttempt := clk.Now()

	// Another operation, without an operation ID, written ahead later: still
	// within KeyTTL when the first one expires.
	srv.Script(status503)
	_, err = tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-22", 2200)))
	other := pendingErr(t, err)

	clk.Advance(31 * time.Minute) // the first is 61 minutes old, the second 31
	sent := len(wire.sent())
	outs = resumeAll(t, tr)
	require.Len(t, outs, 2)
	byKey := map[string]Outcome{}
	for _, o := range outs {
		byKey[o.Record.Key] = o
	}
	require.NoError(t, byKey[other.Key].Err, "the younger one is sent and settles")
	require.Len(t, wire.sent(), sent+1, "only the younger one was sent")
	for _, a := range wire.sent()[sent:] {
		require.Equal(t, []string{other.Key}, a.Keys)
	}

	exp := byKey[perr.Key]
	require.Nil(t, exp.Response)
	require.ErrorIs(t, exp.Err, ErrKeyExpired)
	require.Contains(t, exp.Err.Error(), "order-21/charge")
	require.Contains(t, exp.Err.Error(), perr.Key)
	rec := exp.Record
	require.Equal(t, StateExpired, rec.State)
	require.Equal(t, "order-21/charge", rec.OperationID)
	require.Equal(t, perr.Key, rec.Key)
	require.Equal(t, http.MethodPost, rec.Method)
	require.Equal(t, srv.URL+"/payments", rec.URL)
	require.Equal(t, "checkout", rec.Header.Get("X-Request-Source"))
	require.Equal(t, "application/json", rec.Header.Get("Content-Type"))
	sameBytes(t, []byte(paymentBody("order-21", 2100)), rec.Body, "the body, to find the business reference")
	sum := bodySum(rec.Body)
	require.Equal(t, sum, rec.BodySHA256)
	require.True(t, rec.Created.Equal(t0), "Created is the first attempt's time: %v", rec.Created)
	require.True(t, rec.LastAttempt.Equal(lastAttempt), "LastAttempt: %v, want %v", rec.LastAttempt, lastAttempt)
	require.Equal(t, 2, rec.Attempts)
	require.Equal(t, http.StatusServiceUnavailable, rec.Status)

	// The record stays, body and all, across a restart; it is never sent or
	// reported again, and a call under its operation ID is refused.
	j2 := reopen(t, j)
	kept, err := j2.Lookup("order-21/charge")
	require.NoError(t, err)
	require.Equal(t, StateExpired, kept.State)
	sameBytes(t, rec.Body, kept.Body)
	require.True(t, kept.Created.Equal(t0) && kept.LastAttempt.Equal(lastAttempt))
	tr2, clk2 := transportOn(t, j2, Options{KeyTTL: time.Hour, MaxAttempts: 1}, wire, clk.Now())
	clk2.Advance(24 * time.Hour)
	require.Empty(t, resumeAll(t, tr2))
	req, body := paymentRequest(t, ctx, srv.URL, "order-21", 2100)
	resp, err := tr2.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrKeyExpired)
	require.EqualValues(t, 1, body.closes.Load())
	require.Len(t, wire.sent(), sent+1, "nothing more sent")

	// Reconciling: the server did pay order-21, once.
	lookup, err := srv.Client().Get(srv.URL + "/payments?reference=order-21")
	require.NoError(t, err)
	var found struct{ Data []struct{ Reference string } }
	require.NoError(t, json.Unmarshal(drain(t, lookup), &found))
	require.Len(t, found.Data, 1)
	require.NoError(t, srv.Ledger().Check([]string{"order-21", "order-22"}))
}

// An operation the server asked to wait for longer than KeyTTL (Retry-After)
// is reported expired as soon as its key is past KeyTTL, not when the wait
// ends, and is never sent.
func TestKeyExpiryBeforeNextAttempt(t *testing.T) {
	t.Parallel()
	srv, wire := startPayments(t, nil), newWireLog(t)
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable, RetryAfter: "7200"})
	j := memStore(t)
	tr, clk := transportOver(t, j, Options{KeyTTL: time.Hour}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-23/charge")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-23", 2300)
	_, err := tr.RoundTrip(req)
	perr := pendingErr(t, err)
	require.Equal(t, 2*time.Hour, perr.NextAttempt.Sub(clk.Now()))

	clk.Advance(time.Hour + time.Minute) // past KeyTTL, before the server's time
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.ErrorIs(t, outs[0].Err, ErrKeyExpired)
	require.Equal(t, "order-23/charge", outs[0].Record.OperationID)

	clk.Advance(2 * time.Hour)
	require.Empty(t, resumeAll(t, tr))
	require.Len(t, wire.sent(), 1, "only the first attempt was ever sent")
}
