// Tests for Client's ways out of an operation nothing else will finish
// (client.go's Resolve and Discard, journal/boltjournal's resolve.go), from
// inside the package: an ended operation is never sent again, one a call is
// sending is refused, and the Observer's pending gauge follows.

package idem

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

// failingScenario is a Transport over a fresh journal whose server answers
// 503 to everything but requests carrying the header X-Hold, which wait
// for release.
func failingScenario(t *testing.T, opts *Options) (*Transport, *fakeClock, *recordingServer, chan struct{}) {
	release := make(chan struct{})
	tr, clk, srv := newScenario(t, opts, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			<-release
		}
		reply(w, http.StatusServiceUnavailable)
	})
	return tr, clk, srv, release
}

// Resolve settles a pending operation by operation ID, Discard gives one up
// by a key idem minted and another by the caller's key; the changes survive
// a reopen, Resume sends none of them, and later calls with the same
// operation ID or key get the settled status or ErrKeyExpired, with nothing
// sent. (boltjournal's resolve_test.go has the refusals and the bodies.)
func TestResolveAndDiscard(t *testing.T) {
	tr, clk, srv, _ := failingScenario(t, &Options{MaxAttempts: 1, KeyTTL: time.Hour})
	send := func(ctx context.Context, body string) *PendingError {
		req := newRequest(t, http.MethodPost, srv.URL+"/payments", body)
		_, err := tr.RoundTrip(req.WithContext(ctx))
		return pendingErr(t, err)
	}
	send(WithOperationID(context.Background(), "order-1/charge"), paymentBody("order-1", 10))
	minted := send(context.Background(), paymentBody("order-2", 20)).Key
	send(WithKey(context.Background(), "caller-key-3"), paymentBody("order-3", 30))
	require.Len(t, srv.requests(), 3)
	j := tr.bolt()

	rec, err := j.Resolve(journal.Name{OperationID: "order-1/charge"}, http.StatusCreated)
	require.NoError(t, err)
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, http.StatusCreated, rec.Status)
	require.Nil(t, rec.Body)

	rec, err = j.Discard(journal.Name{Key: minted}, "refunded by support, ticket 77")
	require.NoError(t, err)
	require.Equal(t, StateExpired, rec.State)
	require.Equal(t, "idem: discarded by hand: refunded by support, ticket 77", rec.LastError)
	rec, err = j.Discard(journal.Name{Key: "caller-key-3"}, "")
	require.NoError(t, err)
	require.Equal(t, journal.DiscardedError, rec.LastError)

	// Committed: the same after a reopen.
	j2 := reopen(t, j)
	tr, err = NewTransport(j2, &Options{Base: srv.base(), MaxAttempts: 1, KeyTTL: time.Hour})
	require.NoError(t, err)
	tr.clock = clk
	recs, err := j2.Records()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for _, r := range recs {
		want := StateExpired
		if r.OperationID == "order-1/charge" {
			want = StateSettled
		}
		require.Equal(t, want, r.State, "record %d", seqOf(r))
		require.Nil(t, r.Body)
	}

	clk.Advance(2 * time.Hour) // due, and past KeyTTL
	require.Empty(t, resumeAll(t, tr), "Resume has nothing to do")
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-1", 10))
	_, err = tr.RoundTrip(req.WithContext(WithOperationID(context.Background(), "order-1/charge")))
	var settled *AlreadySettledError
	require.ErrorAs(t, err, &settled)
	require.Equal(t, http.StatusCreated, settled.Status)
	req = newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-3", 30))
	_, err = tr.RoundTrip(req.WithContext(WithKey(context.Background(), "caller-key-3")))
	require.ErrorIs(t, err, ErrKeyExpired, "a discarded operation is never sent again")
	require.Len(t, srv.requests(), 3, "nothing sent since")
}

// Resolve and Discard refuse an operation a call is sending right now
// (boltjournal's TestResolveRefusesHeld has a journal opened read-only).
func TestResolveRefusesInFlight(t *testing.T) {
	tr, _, srv, release := failingScenario(t, &Options{MaxAttempts: 1})
	var wg sync.WaitGroup
	var callErr atomic.Value
	wg.Go(func() {
		req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("held", 1))
		req.Header.Set("X-Hold", "1")
		_, err := tr.RoundTrip(req.WithContext(WithOperationID(context.Background(), "held")))
		callErr.Store(err)
	})
	eventually(t, 2*time.Second, func() bool { return len(srv.requests()) == 1 }, "the call is in flight")
	_, err := tr.bolt().Resolve(journal.Name{OperationID: "held"}, http.StatusCreated)
	require.ErrorIs(t, err, journal.ErrBusy)
	_, err = tr.bolt().Discard(journal.Name{OperationID: "held"}, "")
	require.ErrorIs(t, err, journal.ErrBusy)
	close(release)
	wg.Wait()
	pendingErr(t, callErr.Load().(error))
	rec, err := tr.bolt().Discard(journal.Name{OperationID: "held"}, "")
	require.NoError(t, err, "free once the call returned")
	require.Equal(t, StateExpired, rec.State)
}

// countingObserver counts the pending gauge.
type countingObserver struct {
	NopObserver
	pending atomic.Int64
}

func (o *countingObserver) PendingChanged(d int) { o.pending.Add(int64(d)) }

// Client.Resolve and Client.Discard take the operation off the Observer's
// pending gauge.
func TestClientResolveTellsObserver(t *testing.T) {
	obs := &countingObserver{}
	tr, _, srv, _ := failingScenario(t, &Options{MaxAttempts: 1, Observer: obs})
	c := &Client{journal: tr.bolt(), transport: tr}
	for _, op := range []string{"a", "b"} {
		req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody(op, 1))
		_, err := tr.RoundTrip(req.WithContext(WithOperationID(context.Background(), op)))
		pendingErr(t, err)
	}
	require.EqualValues(t, 2, obs.pending.Load())
	_, err := c.Resolve(journal.Name{OperationID: "a"}, http.StatusCreated)
	require.NoError(t, err)
	_, err = c.Discard(journal.Name{OperationID: "b"}, "")
	require.NoError(t, err)
	_, err = c.Discard(journal.Name{OperationID: "b"}, "")
	require.True(t, errors.Is(err, journal.ErrFinal))
	require.Zero(t, obs.pending.Load())
}
