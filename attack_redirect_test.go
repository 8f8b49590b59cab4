// Attack: redirects after a journaled call (redirect.go) against a hostile
// network and an application that calls its pending work again.

package idem

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// A primary API answers 307 to a failover region (another host, its own
// idempotency store) while it is under maintenance. The hop reaches the
// region, which makes the payment and loses the response: the operation is
// pending at its Location (Record.Location), where the server holds its key.
// Once the maintenance ends, the primary takes payments itself again.
//
// Resume sends the operation to the Location, where the server replays. A
// call that names the operation again (WithOperationID, as the package docs
// invite after a *PendingError) must do the same: sent to the URL, it meets a
// server that never saw the key, and the payment is made twice.
func TestAttackRedirectRecallGoesToLocation(t *testing.T) {
	t.Skip("defect: a call that re-runs a pending operation moved by a 307/308 sends it to Record.URL, not Record.Location as Resume does (transport.go roundTripJournaled uses the caller's req.URL): another server, a second effect")
	region := startPayments(t, nil)
	primary := startPayments(t, nil)
	var maintenance atomic.Bool
	maintenance.Store(true)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if maintenance.Load() {
			w.Header().Set("Location", region.URL+"/payments")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		primary.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	j, _ := testJournal(t)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, clk := transportOn(t, j, Options{MaxAttempts: 1}, base, time.Time{})
	c := &http.Client{Transport: tr}
	region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
	_, err := c.Do(payment(t, front.URL+"/payments", "r", "op"))
	pendingErr(t, err)
	require.Equal(t, 1, region.Ledger().Effects["r"], "the region made the payment")
	rec := onlyRecord(t, tr)
	require.Equal(t, Pending, rec.State)
	require.Equal(t, region.URL+"/payments", rec.Location)

	maintenance.Store(false)
	clk.Advance(time.Minute) // past the backoff
	resp, err := c.Do(payment(t, front.URL+"/payments", "r", "op"))
	require.NoError(t, err)
	drain(t, resp)
	total := region.Ledger().Effects["r"] + primary.Ledger().Effects["r"]
	require.Equal(t, 1, total, "payments made for one operation (region %d, primary %d)",
		region.Ledger().Effects["r"], primary.Ledger().Effects["r"])
}

// The same with the chain completed: the hop settled the operation at the
// region (201). The application calls the operation again within KeyTTL:
// idem sends it again "so the caller gets the server's stored response", but
// to the primary, which never saw the key: a second payment.
func TestAttackRedirectRecallSettledGoesToLocation(t *testing.T) {
	t.Skip("defect: a call that re-runs an operation settled after a 307/308 sends it again to Record.URL, not Record.Location where the server stored its key: a second effect instead of a replay")
	region := startPayments(t, nil)
	primary := startPayments(t, nil)
	var maintenance atomic.Bool
	maintenance.Store(true)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if maintenance.Load() {
			w.Header().Set("Location", region.URL+"/payments")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		primary.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	j, _ := testJournal(t)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, _ := transportOn(t, j, Options{}, base, time.Time{})
	c := &http.Client{Transport: tr}
	resp, err := c.Do(payment(t, front.URL+"/payments", "r", "op"))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, Settled, onlyRecord(t, tr).State)

	maintenance.Store(false)
	resp, err = c.Do(payment(t, front.URL+"/payments", "r", "op"))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, 1, region.Ledger().Effects["r"]+primary.Ledger().Effects["r"],
		"payments made for one operation (region %d, primary %d)", region.Ledger().Effects["r"], primary.Ledger().Effects["r"])
}
