// Tests for one journal shared by several identities (identity.go): an
// operation ID or caller key used under another identity is refused before
// anything is sent, in this process and after a restart, over HTTP/1.1 and
// HTTP/2 with TLS, against the payments testserver, which scopes keys by
// the Authorization header as a real API does.

package idem

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// The credentials of two tenants of one service.
const (
	tokenAcme   = "Bearer acme_tok_3f9a1c"
	tokenAcme2  = "Bearer acme_tok_refreshed_77b2" // acme's token after a refresh
	tokenGlobex = "Bearer globex_tok_c41d0e"
)

// tenantOf is an Options.Identity that maps a bearer token to its tenant.
func tenantOf(r *http.Request) (string, error) {
	switch r.Header.Get("Authorization") {
	case tokenAcme, tokenAcme2:
		return "acme", nil
	case tokenGlobex:
		return "globex", nil
	}
	return "", nil
}

// paymentsOver starts the payments testserver, over HTTP/1.1 on plain TCP or
// over HTTP/2 with TLS, and returns its URL and a base transport to it.
func paymentsOver(tb testing.TB, h2 bool) (*testserver.Server, string, http.RoundTripper) {
	tb.Helper()
	pay := startPayments(tb, nil)
	if !h2 {
		return pay, pay.URL, pay.Client().Transport
	}
	srv := httptest.NewUnstartedServer(pay.Handler())
	srv.EnableHTTP2 = true
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	return pay, srv.URL, srv.Client().Transport
}

// tenantPayment is POST {base}/payments for ref with the tenant's token, in
// ctx (which may carry an operation ID, a key or an identity).
func tenantPayment(tb testing.TB, ctx context.Context, base, ref, token string) *http.Request {
	tb.Helper()
	req, _ := paymentRequest(tb, ctx, base, ref, 4200)
	req.Header.Set("Authorization", token)
	return req
}

// requireNothingSent asserts the server got no request since it had got n.
func requireNothingSent(tb testing.TB, pay *testserver.Server, n int) {
	tb.Helper()
	require.Equal(tb, n, pay.Ledger().Requests, "nothing may be sent")
}

// A pending operation is not re-sent with another tenant's credentials:
// that would make the payment under the wrong account, settle the first
// tenant's record with it, and the first tenant's payment would never be
// made.
func TestIdentityPendingNotResentUnderOtherCredentials(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "http2-tls"}[h2], func(t *testing.T) {
			t.Parallel()
			pay, base, rt := paymentsOver(t, h2)
			j, _ := testJournal(t)
			tr, clk := transportOn(t, j, Options{MaxAttempts: 1}, rt, time.Time{})
			pay.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
			ctx := WithOperationID(context.Background(), "order-1/charge")

			_, err := tr.RoundTrip(tenantPayment(t, ctx, base, "order-1", tokenAcme))
			pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
			sent := pay.Ledger().Requests

			_, err = tr.RoundTrip(tenantPayment(t, ctx, base, "order-1", tokenGlobex))
			require.ErrorIs(t, err, ErrIdentityMismatch)
			require.NotErrorIs(t, err, ErrAlreadySettled)
			requireNothingSent(t, pay, sent)
			rec, err := j.Lookup("order-1/charge")
			require.NoError(t, err)
			require.Equal(t, StatePending, rec.State, "still acme's, still pending")

			// acme's own call still runs it, once.
			resp, err := tr.RoundTrip(tenantPayment(t, ctx, base, "order-1", tokenAcme))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)
			require.NoError(t, pay.Ledger().Check([]string{"order-1"}))
		})
	}
}

// A settled operation is neither replayed nor re-sent under another tenant's
// credentials, within KeyTTL (where a re-send would make a second payment,
// the server scoping the key to the other tenant) or after it (where the
// call was told the other tenant's status).
func TestIdentitySettledNotReplayedUnderOtherCredentials(t *testing.T) {
	for _, past := range []bool{false, true} {
		t.Run(map[bool]string{false: "within-KeyTTL", true: "past-KeyTTL"}[past], func(t *testing.T) {
			t.Parallel()
			pay, base, rt := paymentsOver(t, false)
			j := memStore(t)
			tr, clk := transportOver(t, j, Options{}, rt, time.Time{})
			ctx := WithOperationID(context.Background(), "order-2/charge")
			resp, err := tr.RoundTrip(tenantPayment(t, ctx, base, "order-2", tokenAcme))
			require.NoError(t, err)
			drain(t, resp)
			require.NoError(t, flushStore(j))
			if past {
				clk.Advance(DefaultKeyTTL + time.Minute)
			}
			sent := pay.Ledger().Requests

			_, err = tr.RoundTrip(tenantPayment(t, ctx, base, "order-2", tokenGlobex))
			require.ErrorIs(t, err, ErrIdentityMismatch)
			require.NotErrorIs(t, err, ErrAlreadySettled, "acme's status is not globex's to see")
			requireNothingSent(t, pay, sent)
			require.NoError(t, pay.Ledger().Check([]string{"order-2"}))
		})
	}
}

// A caller's own Idempotency-Key is bound the same way.
func TestIdentityCallerKeyUnderOtherCredentials(t *testing.T) {
	pay, base, rt := paymentsOver(t, false)
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, rt, time.Time{})
	call := func(token string) (*http.Response, error) {
		req := tenantPayment(t, context.Background(), base, "order-3", token)
		req.Header.Set(DefaultKeyHeader, "shared-key-3")
		return tr.RoundTrip(req)
	}
	resp, err := call(tokenAcme)
	require.NoError(t, err)
	drain(t, resp)
	sent := pay.Ledger().Requests

	_, err = call(tokenGlobex)
	require.ErrorIs(t, err, ErrIdentityMismatch)
	requireNothingSent(t, pay, sent)
	_, err = call("")
	require.ErrorIs(t, err, ErrIdentityMismatch, "no credentials are other credentials")
	requireNothingSent(t, pay, sent)
	require.NoError(t, pay.Ledger().Check([]string{"order-3"}))
}

// The binding is in the journal: a new process refuses the other tenant too.
func TestIdentityAcrossRestart(t *testing.T) {
	pay, base, rt := paymentsOver(t, false)
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{MaxAttempts: 1}, rt, time.Time{})
	pay.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	ctx := WithOperationID(context.Background(), "order-4/charge")
	_, err := tr.RoundTrip(tenantPayment(t, ctx, base, "order-4", tokenAcme))
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt)

	j = reopen(t, j)
	tr, _ = transportOn(t, j, Options{MaxAttempts: 1}, rt, clk.Now())
	sent := pay.Ledger().Requests
	_, err = tr.RoundTrip(tenantPayment(t, ctx, base, "order-4", tokenGlobex))
	require.ErrorIs(t, err, ErrIdentityMismatch)
	requireNothingSent(t, pay, sent)

	resp, err := tr.RoundTrip(tenantPayment(t, ctx, base, "order-4", tokenAcme))
	require.NoError(t, err)
	drain(t, resp)
	require.NoError(t, pay.Ledger().Check([]string{"order-4"}))
}

// errorText is err's text, or "".
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The refusal names neither the other identity's key nor its credentials.
func TestIdentityMismatchErrorRevealsNothing(t *testing.T) {
	_, base, rt := paymentsOver(t, false)
	j, _ := testJournal(t)
	tr, _ := transportOn(t, j, Options{}, rt, time.Time{})
	ctx := WithOperationID(context.Background(), "order-5/charge")
	resp, err := tr.RoundTrip(tenantPayment(t, ctx, base, "order-5", tokenAcme))
	require.NoError(t, err)
	drain(t, resp)
	rec, err := j.Lookup("order-5/charge")
	require.NoError(t, err)

	_, err = tr.RoundTrip(tenantPayment(t, ctx, base, "order-5", tokenGlobex))
	require.ErrorIs(t, err, ErrIdentityMismatch)
	msg := errorText(err)
	require.Contains(t, msg, "order-5/charge")
	for _, s := range []string{rec.Key, "acme", "globex", "201"} {
		require.False(t, strings.Contains(msg, s), "the error shows %q: %s", s, msg)
	}
}
