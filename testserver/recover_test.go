// recover_test.go tests the recovery of a key stuck in progress (recoverPayment in
// idempotency.go): its holder's lease lapsed on the server's clock, so the middleware asks
// the hook, which looks the payment up instead of charging again.

package testserver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/stretchr/testify/require"
)

// clock is a settable clock for SetNow and memstore.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A holder stalls (a hold) past its lease: the first copy to find the key stuck gets 409,
// the hook seeing the handler still running; once it made the payment, the next copy gets
// that payment's answer, rebuilt by the hook and stored, and nothing is charged twice.
func TestStuckKeyRecoveredFromPayment(t *testing.T) {
	// An hour's lease: its heartbeat (every 20 min) never runs, so only the clock moves it.
	s := newTestServer(t, &Options{Lease: time.Hour})
	clk := newClock()
	s.SetNow(clk.Now)
	s.Script(Fault{Kind: FaultHold, Delay: time.Minute})

	var wg sync.WaitGroup
	var first answer
	var firstErr error
	req := postReq(t, s, "k", payBody("r", 1))
	wg.Go(func() { first, firstErr = do(t, req, time.Minute) })
	waitHolding(t, s, 1)

	clk.Advance(2 * time.Hour) // the holder's lease lapsed: the key is stuck
	a := post(t, s, "k", payBody("r", 1))
	require.Equal(t, http.StatusConflict, a.status, "the handler still runs: undecided")
	require.Equal(t, "key-stuck", problemType(t, a))

	s.ReleaseHolds()
	wg.Wait()
	require.NoError(t, firstErr)
	require.Equal(t, http.StatusCreated, first.status, "the stalled holder's client gets its answer")

	clk.Advance(2 * time.Hour) // the 409's own claim lapses in turn
	for range 2 {
		a = post(t, s, "k", payBody("r", 1))
		require.Equal(t, http.StatusCreated, a.status, "body %s", a.body)
		require.Equal(t, "true", a.header.Get(replayedHeader))
		require.Equal(t, first.body, a.body, "the payment's answer, byte for byte")
		require.Equal(t, first.header.Get("Location"), a.header.Get("Location"))
	}
	l := s.Ledger()
	require.Equal(t, map[string]int{"r": 1}, l.Effects)
	require.Equal(t, 2, l.Replays)
	require.Equal(t, 1, l.InProgress)
}

// releaseFails is a memstore whose Release fails while fail is set, so a key whose handler
// refused the request stays stuck in progress.
type releaseFails struct {
	*memstore.Store
	fail atomic.Bool
}

func (st *releaseFails) Release(ctx context.Context, sc server.Scope, token string) error {
	if st.fail.Load() {
		return errors.New("store down")
	}
	return st.Store.Release(ctx, sc, token)
}

// A key stuck without a payment made under it (its handler refused the body, and the Store
// failed to release it): the hook lets the handler run again rather than answer 409 until
// the key expires.
func TestStuckKeyWithoutPaymentReruns(t *testing.T) {
	clk := newClock()
	store := &releaseFails{Store: memstore.New(&memstore.Options{Now: clk.Now})}
	store.fail.Store(true)
	s := newTestServer(t, &Options{Store: store, Lease: time.Hour})
	bad := `{"amount": 0, "currency": "eur", "reference": "r"}`

	a := post(t, s, "k", bad)
	require.Equal(t, http.StatusBadRequest, a.status)
	a = post(t, s, "k", bad)
	require.Equal(t, http.StatusConflict, a.status, "in progress: the release failed")
	require.Equal(t, "key-in-progress", problemType(t, a))

	store.fail.Store(false)
	clk.Advance(2 * time.Hour)
	a = post(t, s, "k", bad)
	require.Equal(t, http.StatusBadRequest, a.status, "rerun: the handler answered again")
	require.Contains(t, string(a.body), "invalid_request")
	require.Equal(t, http.StatusCreated, post(t, s, "k", payBody("r", 1)).status, "released this time")
	require.Equal(t, map[string]int{"r": 1}, s.Ledger().Effects)
}

// completeFails is a memstore whose Complete always fails, as when the reply to a
// completion is lost: the record stays stuck in progress although the payment was made.
type completeFails struct{ *memstore.Store }

func (completeFails) Complete(context.Context, server.Scope, string, *server.Response, time.Duration) error {
	return errors.New("store reply lost")
}

// Two servers share one Store. A key's payment is made on server A, whose completion
// fails, so the key stays stuck; its retry reaches server B once A's lease has lapsed.
// Sharing Payments, B's Recover finds A's payment and replays it; with a registry each,
// B finds nothing and pays again: the duplicate that Options.Payments is for.
func TestStuckKeyRecoveredOnAnotherServer(t *testing.T) {
	for _, shared := range []bool{true, false} {
		name := map[bool]string{true: "shared Payments", false: "a registry each"}[shared]
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			store := memstore.New(&memstore.Options{Now: clk.Now})
			var payments *Payments
			if shared {
				payments = NewPayments()
			}
			a := newTestServer(t, &Options{Store: completeFails{store}, Payments: payments, Lease: time.Hour})
			b := newTestServer(t, &Options{Store: store, Payments: payments, Lease: time.Hour})

			first := post(t, a, "k", payBody("r", 1))
			require.Equal(t, http.StatusCreated, first.status, "body %s", first.body)
			clk.Advance(2 * time.Hour) // A's lease lapses: the key is stuck

			again := post(t, b, "k", payBody("r", 1))
			require.Equal(t, http.StatusCreated, again.status, "body %s", again.body)
			effects := a.Ledger().Payments() + b.Ledger().Payments()
			if !shared {
				require.Equal(t, 2, effects, "B cannot see A's payment: it pays again")
				return
			}
			require.Equal(t, "true", again.header.Get(replayedHeader))
			require.Equal(t, first.body, again.body, "A's payment, byte for byte")
			require.Equal(t, 1, effects)
			require.Len(t, decodeList(t, get(t, b, "/payments?reference=r")), 1, "B lists A's payment")
		})
	}
}

// renewFails is a memstore that never answers a renewal: a holder cannot confirm its
// lease, and the middleware cancels its handler's context with ErrLeaseUnconfirmed.
type renewFails struct{ *memstore.Store }

func (renewFails) Renew(context.Context, server.Scope, string, time.Duration) error {
	return errors.New("renewal: no answer")
}

// A handler whose context the middleware ends with a cause of its own (a lease it could not
// confirm) makes no payment, even after a hold; the client going away, which no longer
// ends the handler's context at all, does not stop one.
func TestHandlerStoppedMakesNoPayment(t *testing.T) {
	s := newTestServer(t, &Options{Store: renewFails{memstore.New(nil)}, Lease: 200 * time.Millisecond})
	s.Script(Fault{Kind: FaultHold, Delay: 500 * time.Millisecond})
	a, err := do(t, postReq(t, s, "k", payBody("r", 1)), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, a.status, "body %s", a.body)
	require.Contains(t, string(a.body), server.ErrLeaseUnconfirmed.Error())
	require.Zero(t, s.Ledger().Payments())

	s2 := newTestServer(t, nil)
	s2.Script(Fault{Kind: FaultHold, Delay: 200 * time.Millisecond})
	_, err = do(t, postReq(t, s2, "k2", payBody("r2", 1)), 50*time.Millisecond)
	require.Error(t, err, "the client gives up during the hold")
	require.Eventually(t, func() bool { return s2.Ledger().Effects["r2"] == 1 }, 5*time.Second, 5*time.Millisecond,
		"the hold runs to its end and pays")
}
