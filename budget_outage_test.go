package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outageFront is a loopback server in front of a testserver. While down,
// every request gets 503 without reaching the payments API. It counts the
// requests it receives and the first attempts among them: requests with a
// key it has not seen before.
type outageFront struct {
	*httptest.Server
	down atomic.Bool

	mu       sync.Mutex
	keys     map[string]bool
	requests int
	firsts   int
}

func newOutageFront(tb testing.TB, payments *testserver.Server) *outageFront {
	f := &outageFront{keys: map[string]bool{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests++
		if k := r.Header.Get(DefaultKeyHeader); !f.keys[k] {
			f.keys[k] = true
			f.firsts++
		}
		f.mu.Unlock()
		if f.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		payments.Handler().ServeHTTP(w, r)
	}))
	tb.Cleanup(f.Close)
	return f
}

// counts returns the requests and first attempts received so far.
func (f *outageFront) counts() (requests, firsts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, f.firsts
}

// During a sustained outage (every request 503), once the bucket is empty
// retries add at most 10% to the request rate; every call is left pending,
// none lost; when the server is back, Resume sends them all, exactly once.
// Run with -v to see the figures.
func TestRetryBudgetOutageAmplification(t *testing.T) {
	t.Parallel()
	payments := startPayments(t, nil)
	front := newOutageFront(t, payments)
	front.down.Store(true)
	tr, clk := transportOver(t, memStore(t), Options{}, front.Client().Transport, time.Time{})
	host := strings.TrimPrefix(front.URL, "http://")

	var refs []string
	call := func() error {
		ref := fmt.Sprintf("order-outage-%05d", len(refs))
		refs = append(refs, ref)
		clk.Advance(time.Millisecond) // calls arrive at 1,000/s of fake time
		req, _ := paymentRequest(t, context.Background(), front.URL, ref, 1)
		resp, err := tr.RoundTrip(req)
		require.Nil(t, resp, ref)
		pendingErr(t, err) // pending, never lost
		return err
	}

	// The burst: retries at first, until the bucket is empty.
	for tr.budget.available(host) >= 1 {
		require.Less(t, len(refs), 1000, "the bucket never emptied")
		call()
	}
	drainCalls := len(refs)
	reqA, firstA := front.counts()

	const measured = 1000
	denied := 0
	for range measured {
		if errors.Is(call(), ErrRetryBudgetExhausted) {
			denied++
		}
	}
	reqB, firstB := front.counts()
	requests, firsts := reqB-reqA, firstB-firstA
	amp := float64(requests) / float64(firsts)
	t.Logf("outage, MaxAttempts %d, RetryBudget defaults (Ratio %.2f, Burst %d): the bucket emptied after %d calls (%d requests)",
		tr.cfg.MaxAttempts, tr.cfg.RetryBudget.Ratio, tr.cfg.RetryBudget.Burst, drainCalls, reqA)
	t.Logf("then %d calls: %d requests for %d first attempts: amplification %.3f (%d calls denied a retry)",
		measured, requests, firsts, amp, denied)
	require.Equal(t, measured, firsts)
	require.LessOrEqual(t, amp, 1.10)
	require.GreaterOrEqual(t, amp, 1.09, "retries still flow at Ratio")
	require.Greater(t, float64(reqA)/float64(firstA), 1.10, "the burst allowed retries")
	n, err := pendingCount(tr.journal)
	require.NoError(t, err)
	require.Equal(t, len(refs), n, "every call is pending")

	// The server is back. With no other traffic the bucket refills through
	// probes and answers, doubling each pass.
	front.down.Store(false)
	clk.Advance(time.Hour) // past every next-attempt time
	passes, deniedOutcomes := 0, 0
	for ; passes < 40; passes++ {
		if n, err := pendingCount(tr.journal); err == nil && n == 0 {
			break
		}
		clk.Advance(probeEvery)
		require.NoError(t, tr.Resume(context.Background(), func(o Outcome) {
			switch {
			case o.Response != nil:
				o.Response.Body.Close()
			case errors.Is(o.Err, ErrRetryBudgetExhausted):
				deniedOutcomes++                             // fn calls are serialised
				assert.ErrorAs(t, o.Err, new(*PendingError)) // fn may run off the test goroutine
			default:
				t.Errorf("%s: %v", o.Record.OperationID, o.Err)
			}
		}))
	}
	t.Logf("recovery: %d pending operations resumed in %d passes (%d held back by the budget along the way)",
		len(refs), passes, deniedOutcomes)
	require.Less(t, passes, 20)
	l := payments.Ledger()
	require.NoError(t, l.Check(refs))
	require.Equal(t, len(refs), l.Payments())
}

// Denied retries under concurrent load leave operations pending, and Resume
// later settles each exactly once: 400 operations from 20 goroutines against
// a server whose front answers 503 to two requests in three, and which itself
// loses responses and drops connections, with a small burst so the budget
// bites. Then the 503s stop and Resume passes settle everything.
func TestRetryBudgetConcurrentNothingLost(t *testing.T) {
	t.Parallel()
	plan, err := testserver.ParsePlan(5, "lost=0.05,drop=0.05")
	require.NoError(t, err)
	srv := startPayments(t, &testserver.Options{Plan: plan})
	front := newOutageFront(t, srv)
	var seen atomic.Int32
	front.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1)%3 != 0 && front.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		srv.Handler().ServeHTTP(w, r)
	})
	front.down.Store(true)
	tr, clk := transportOver(t, memStore(t), Options{RetryBudget: RetryBudget{Burst: 5}},
		front.Client().Transport, time.Time{})

	const ops, workers = 400, 20
	refs := make([]string, ops)
	for i := range refs {
		refs[i] = fmt.Sprintf("order-budget-%04d", i)
	}
	var denied atomic.Int32
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				req, _ := paymentRequest(t, context.Background(), front.URL, refs[i], 1+i)
				resp, err := tr.RoundTrip(req)
				var pe *PendingError
				switch {
				case err == nil:
					resp.Body.Close()
				case errors.As(err, &pe):
					if errors.Is(err, ErrRetryBudgetExhausted) {
						denied.Add(1)
					}
				default:
					t.Errorf("%s: %v", refs[i], err)
				}
			}
		})
	}
	for i := range ops {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	require.Positive(t, denied.Load(), "the budget denied some retries")
	front.down.Store(false)

	for pass := 0; pass < 60; pass++ {
		if n, err := pendingCount(tr.journal); err == nil && n == 0 {
			break
		}
		clk.Advance(time.Minute)
		require.NoError(t, tr.Resume(context.Background(), func(o Outcome) {
			if o.Response != nil {
				o.Response.Body.Close()
			}
		}))
	}
	n, err := pendingCount(tr.journal)
	require.NoError(t, err)
	require.Zero(t, n, "everything settled")
	l := srv.Ledger()
	require.NoError(t, l.Check(refs))
	require.Equal(t, ops, l.Payments())
	t.Logf("%d retries denied; all %d operations settled exactly once", denied.Load(), ops)
}
