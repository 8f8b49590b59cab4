// Regression tests for races between the journal's deferred writes, its
// readers, Prune and Close, found by review.

package idem

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/memjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

type certFailure struct{}

func (certFailure) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, x509.UnknownAuthorityError{}
}

func payWithOp(t *testing.T, c *http.Client, url, op, ref string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(WithOperationID(context.Background(), op), http.MethodPost,
		url+"/payments", strings.NewReader(paymentBody(ref, 10)))
	require.NoError(t, err)
	return c.Do(req)
}

// A failed operation called again that fails the same way, before anything
// was written, is failed again: not pending, so Resume leaves it alone.
func TestFailedOperationFailingAgainStaysFailed(t *testing.T) {
	tr, _ := testTransport(t, &Options{Base: certFailure{}, MaxAttempts: 1})
	c := &http.Client{Transport: tr}
	for range 2 {
		_, err := payWithOp(t, c, "http://127.0.0.1:1", "op-f", "r")
		require.ErrorIs(t, err, ErrPermanent)
		rec, err := tr.bolt().Lookup("op-f")
		require.NoError(t, err)
		require.Equal(t, StateFailed, rec.State)
	}
	resumed := 0
	require.NoError(t, tr.Resume(context.Background(), func(Outcome) { resumed++ }))
	require.Zero(t, resumed)
}

// certThenHold fails its first attempt with a certificate error, holds the second
// until released, and sends the rest.
type certThenHold struct {
	n                 atomic.Int32
	entered, released chan struct{}
	next              http.RoundTripper
}

func (g *certThenHold) RoundTrip(r *http.Request) (*http.Response, error) {
	switch g.n.Add(1) {
	case 1:
		return nil, x509.UnknownAuthorityError{}
	case 2:
		close(g.entered)
		<-g.released
	}
	return g.next.RoundTrip(r)
}

// Prune runs, with the failed operation past Retention, while a call sends it
// again. The call made it pending first, so Prune leaves it alone: it keeps
// its body and its operation ID.
func TestPruneWhileFailedOperationIsSentAgain(t *testing.T) {
	srv := startPayments(t, &testserver.Options{RequireKey: true})
	g := &certThenHold{entered: make(chan struct{}), released: make(chan struct{}), next: srv.Client().Transport}
	var clk *fakeClock
	j := memjournal.New(&memjournal.Options{Now: func() time.Time { return clk.Now() }}) // prunes by the test's clock
	t.Cleanup(func() { j.Close() })
	tr, clk := transportWith(t, j, &Options{Base: g, MaxAttempts: 1})
	c := &http.Client{Transport: tr}

	_, err := payWithOp(t, c, srv.URL, "order-1", "ref-1")
	require.ErrorIs(t, err, ErrPermanent)
	done := make(chan error, 1)
	go func() {
		resp, err := payWithOp(t, c, srv.URL, "order-1", "ref-1")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-g.entered
	clk.Advance(8 * 24 * time.Hour)
	n, err := j.Prune(boltjournal.DefaultRetention)
	require.NoError(t, err)
	require.Zero(t, n, "an operation being sent again is pending, never pruned")
	close(g.released)
	require.NoError(t, <-done)

	rec, err := j.Get(context.Background(), journal.Name{OperationID: "order-1"})
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Equal(t, StateSettled, rec.State)
	// Eight days on, past KeyTTL, the operation ID still names it: refused,
	// not sent under a new key.
	requests := srv.Ledger().Requests
	_, err = payWithOp(t, c, srv.URL, "order-1", "ref-1")
	require.ErrorIs(t, err, ErrAlreadySettled)
	require.Equal(t, requests, srv.Ledger().Requests)
	require.Equal(t, map[string]int{"ref-1": 1}, srv.Ledger().Effects)
}

// Callers racing on each operation ID, half the answers 503: once one got a
// final response, the operation is never pending again.
func TestSettledOperationNeverPendingAgain(t *testing.T) {
	t.Parallel()
	plan, err := testserver.ParsePlan(1, "503=0.5")
	require.NoError(t, err)
	srv := startPayments(t, &testserver.Options{Plan: plan})
	j := fastJournal(t)
	tr, _ := transportOn(t, j, Options{MaxAttempts: 1}, &http.Transport{MaxIdleConnsPerHost: 16}, time.Time{})
	tr.clock = realClock{}
	c := &http.Client{Transport: tr}
	var mu sync.Mutex
	settled := map[string]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for n := range 300 {
		op := fmt.Sprintf("op-%d", n)
		for range 3 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				resp, err := payWithOp(t, c, srv.URL, op, op)
				if err != nil {
					return
				}
				if resp.StatusCode == http.StatusCreated {
					mu.Lock()
					settled[op] = true
					mu.Unlock()
				}
				resp.Body.Close()
			})
		}
	}
	wg.Wait()
	recs, err := j.Records()
	require.NoError(t, err)
	require.NotEmpty(t, settled)
	for _, r := range recs {
		if settled[r.OperationID] {
			require.NotEqual(t, StatePending, r.State, "%s got a 201 but is pending again", r.OperationID)
		}
	}
}
