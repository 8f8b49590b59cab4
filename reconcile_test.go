// Tests for reconcile.go: a Reconciler asked before a re-send of an operation
// that may have reached the server, in RoundTrip and in Resume, and for one
// whose key expired; never twice at once, never a silent replay (S41).

package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/testserver"
)

// hangUp closes the connection of a request the server has read: the request was
// written, its outcome is unknown to the client.
func hangUp(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}

// reconciler is a Reconciler that answers with answer, counting its calls and the
// greatest number of them running at once.
type reconciler struct {
	answer  func(rec *Record, expired bool) (Reconciliation, error)
	calls   atomic.Int32
	running atomic.Int32
	most    atomic.Int32
	mu      sync.Mutex
	seen    []*Record
	expired []bool
}

func (r *reconciler) reconcile(_ context.Context, rec *Record, expired bool) (Reconciliation, error) {
	r.calls.Add(1)
	n := r.running.Add(1)
	defer r.running.Add(-1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	r.mu.Lock()
	r.seen, r.expired = append(r.seen, rec), append(r.expired, expired)
	r.mu.Unlock()
	time.Sleep(time.Millisecond) // room for an overlap to show
	return r.answer(rec, expired)
}

// found is the response a look-up by reference finds.
func found() *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"id":"pay_1"}`))}
}

func bodyText(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// After an attempt cut off once its request was written, the Reconciler is asked before
// the next: found, the call settles with what it found and nothing is sent again.
func TestReconcileAfterUncertainAttempt(t *testing.T) {
	r := &reconciler{answer: func(*Record, bool) (Reconciliation, error) { return Reconciliation{Response: found()}, nil }}
	tr, _, srv := memScenario(t, &Options{Reconcile: r.reconcile}, func(n int, w http.ResponseWriter, _ *http.Request) {
		hangUp(w) // the server acted; its answer is lost
	})
	req, _ := http.NewRequestWithContext(WithOperationID(context.Background(), "order-1/charge"), http.MethodPost, srv.URL, strings.NewReader(`{"reference":"order-1"}`))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, `{"id":"pay_1"}`, bodyText(t, resp))
	assert.Len(t, srv.requests(), 1, "the operation was sent again")
	assert.EqualValues(t, 1, r.calls.Load())
	assert.Equal(t, "order-1/charge", r.seen[0].OperationID)
	assert.Equal(t, `{"reference":"order-1"}`, string(r.seen[0].Body))
	rec := onlyRecordIn(t, tr.journal)
	assert.Equal(t, StateSettled, rec.State)
	assert.Equal(t, http.StatusOK, rec.Status)
}

// A refused dial never left: the next attempt is sent without asking the Reconciler.
func TestReconcileNotAfterRefusedDial(t *testing.T) {
	r := &reconciler{answer: func(*Record, bool) (Reconciliation, error) {
		t.Error("the Reconciler was asked after a refused dial")
		return Reconciliation{}, nil
	}}
	var dials atomic.Int32
	tr, _, srv := memScenario(t, &Options{Reconcile: r.reconcile}, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	real := srv.base()
	tr.cfg.Base = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if dials.Add(1) == 1 {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
		}
		return real.RoundTrip(req)
	})
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Zero(t, r.calls.Load())
}

// Each answer, in a call: not happened sends it (once more); cannot tell leaves it
// pending, unsent, with ErrNotReconciled.
func TestReconcileAnswersInRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer Reconciliation
		err    error
	}{
		{"send", Reconciliation{Send: true}, nil},
		{"undecided", Reconciliation{}, nil},
		{"error", Reconciliation{}, errors.New("the provider's search is down")},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &reconciler{answer: func(*Record, bool) (Reconciliation, error) { return c.answer, c.err }}
			tr, _, srv := memScenario(t, &Options{Reconcile: r.reconcile}, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					hangUp(w)
					return
				}
				w.WriteHeader(http.StatusCreated)
			})
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
			resp, err := tr.RoundTrip(req)
			if c.answer.Send {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Len(t, srv.requests(), 2)
				assert.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)
				return
			}
			var pending *PendingError
			require.ErrorAs(t, err, &pending)
			assert.ErrorIs(t, err, ErrNotReconciled)
			assert.Len(t, srv.requests(), 1, "sent although the Reconciler could not tell")
			assert.Equal(t, StatePending, onlyRecordIn(t, tr.journal).State)
		})
	}
}

// leavePending journals an operation whose only attempt was cut off after it was
// written, and returns the server, whose later requests answer 201.
func leavePending(t *testing.T, opts *Options) (*Transport, *fakeClock, *recordingServer) {
	t.Helper()
	tr, clk, srv := memScenario(t, opts, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			hangUp(w)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	req, _ := http.NewRequestWithContext(WithMaxAttempts(context.Background(), 1), http.MethodPost, srv.URL, strings.NewReader(`{"reference":"r"}`))
	_, err := tr.RoundTrip(req)
	var pending *PendingError
	require.ErrorAs(t, err, &pending)
	pastNextAttempt(clk, pending.NextAttempt)
	return tr, clk, srv
}

// resumeReconciling resumes every due operation with r as the Reconciler (WithReconcile).
func resumeReconciling(t *testing.T, tr *Transport, r Reconciler) []Outcome {
	t.Helper()
	var outs []Outcome
	require.NoError(t, tr.Resume(WithReconcile(context.Background(), r), func(o Outcome) {
		if o.Response != nil {
			io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
		}
		outs = append(outs, o)
	}))
	return outs
}

// Each answer, in Resume: found settles it unsent and reports what was found; not
// happened sends it; cannot tell leaves it pending, unsent.
func TestReconcileAnswersInResume(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func() Reconciliation
		sent   int
		state  State
	}{
		{"found", func() Reconciliation { return Reconciliation{Response: found()} }, 1, StateSettled},
		{"send", func() Reconciliation { return Reconciliation{Send: true} }, 2, StateSettled},
		{"undecided", func() Reconciliation { return Reconciliation{} }, 1, StatePending},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, _, srv := leavePending(t, nil)
			r := &reconciler{answer: func(*Record, bool) (Reconciliation, error) { return c.answer(), nil }}
			outs := resumeReconciling(t, tr, r.reconcile)
			require.Len(t, outs, 1)
			assert.Len(t, srv.requests(), c.sent)
			assert.Equal(t, c.state, onlyRecordIn(t, tr.journal).State)
			assert.EqualValues(t, 1, r.calls.Load())
			switch c.state {
			case StateSettled:
				require.NotNil(t, outs[0].Response)
			default:
				assert.ErrorIs(t, outs[0].Err, ErrNotReconciled)
			}
		})
	}
}

// An operation older than KeyTTL is not expired while a Reconciler can settle it: found,
// it settles without a request; without a Reconciler it expires, as before.
func TestReconcileSettlesExpiredKeyWithoutSending(t *testing.T) {
	r := &reconciler{answer: func(_ *Record, expired bool) (Reconciliation, error) {
		if !expired {
			return Reconciliation{}, errors.New("asked as if the key were live")
		}
		return Reconciliation{Response: found()}, nil
	}}
	tr, clk, srv := leavePending(t, nil)
	clk.Advance(DefaultKeyTTL + time.Hour)
	outs := resumeReconciling(t, tr, r.reconcile)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	assert.Len(t, srv.requests(), 1, "an expired key was sent")
	assert.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)
	assert.Equal(t, []bool{true}, r.expired)

	tr2, clk2, srv2 := leavePending(t, nil)
	clk2.Advance(DefaultKeyTTL + time.Hour)
	outs = resumeAll(t, tr2)
	require.Len(t, outs, 1)
	assert.ErrorIs(t, outs[0].Err, ErrKeyExpired)
	assert.Len(t, srv2.requests(), 1)
}

// A call naming an operation whose key expired asks the Reconciler too; found, the call
// gets what was found and nothing is sent.
func TestReconcileExpiredCall(t *testing.T) {
	r := &reconciler{answer: func(*Record, bool) (Reconciliation, error) { return Reconciliation{Response: found()}, nil }}
	tr, clk, srv := memScenario(t, &Options{Reconcile: r.reconcile}, func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ctx := WithOperationID(context.Background(), "order-9/charge")
	req, _ := http.NewRequestWithContext(WithMaxAttempts(ctx, 1), http.MethodPost, srv.URL, strings.NewReader(`{}`))
	_, err := tr.RoundTrip(req)
	var pending *PendingError
	require.ErrorAs(t, err, &pending)
	assert.Zero(t, r.calls.Load(), "asked before the operation's first attempt")
	clk.Advance(DefaultKeyTTL + time.Hour)
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{}`))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, `{"id":"pay_1"}`, bodyText(t, resp))
	assert.Len(t, srv.requests(), 1)
	assert.Equal(t, []bool{true}, r.expired)
}

// Calls naming one operation and a Resume, all at once, never run the Reconciler for it
// twice at the same time: they hold the operation's claim while it runs.
func TestReconcileNeverTwiceAtOnce(t *testing.T) {
	r := &reconciler{answer: func(*Record, bool) (Reconciliation, error) { return Reconciliation{Send: true}, nil }}
	tr, clk, srv := memScenario(t, &Options{Reconcile: r.reconcile}, func(n int, w http.ResponseWriter, _ *http.Request) {
		hangUp(w) // never an answer: every call and resume is uncertain
	})
	ctx := WithOperationID(context.Background(), "order-7/charge")
	req, _ := http.NewRequestWithContext(WithMaxAttempts(ctx, 1), http.MethodPost, srv.URL, strings.NewReader(`{}`))
	_, err := tr.RoundTrip(req)
	var pending *PendingError
	require.ErrorAs(t, err, &pending)
	pastNextAttempt(clk, pending.NextAttempt)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(WithMaxAttempts(ctx, 2), http.MethodPost, srv.URL, strings.NewReader(`{}`))
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Go(func() { _ = tr.Resume(context.Background(), nil) })
	wg.Wait()
	assert.Positive(t, r.calls.Load())
	assert.EqualValues(t, 1, r.most.Load(), "the Reconciler ran twice at once for one operation")
}

// byReference is the Reconciler a client of a provider that ignores keys writes: it looks
// the payment up by the reference in the journaled body.
func byReference(base string) Reconciler {
	return func(ctx context.Context, rec *Record, _ bool) (Reconciliation, error) {
		var body struct{ Reference string }
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			return Reconciliation{}, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/payments?reference="+url.QueryEscape(body.Reference), nil)
		if err != nil {
			return Reconciliation{}, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return Reconciliation{}, err // cannot tell
		}
		defer resp.Body.Close()
		var list struct{ Data []json.RawMessage }
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
			return Reconciliation{}, fmt.Errorf("look-up answered %d", resp.StatusCode)
		}
		if len(list.Data) == 0 {
			return Reconciliation{Send: true}, nil
		}
		return Reconciliation{Response: &http.Response{StatusCode: http.StatusOK, Header: http.Header{},
			Body: io.NopCloser(bytes.NewReader(list.Data[0]))}}, nil
	}
}

// S41: against a provider that ignores idempotency keys, a payment whose answer was lost
// (charged, then the connection cut) is looked up by its reference before it is sent
// again, and found: settled, charged once. Without a Reconciler the retry charges again.
func TestS41KeylessProviderReconciled(t *testing.T) {
	for _, reconcile := range []bool{true, false} {
		srv := testserver.NewServer(&testserver.Options{IgnoreKeys: true})
		t.Cleanup(srv.Close)
		srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
		opts := &Options{InitialInterval: time.Millisecond}
		if reconcile {
			opts.Reconcile = byReference(srv.URL)
		}
		tr, _ := memTransport(t, opts)
		tr.clock = realClock{}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":100,"currency":"eur","reference":"order-41"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		l := srv.Ledger()
		if reconcile {
			assert.Equal(t, 1, l.Effects["order-41"], "charged again although the look-up found the payment")
			assert.Equal(t, 1, l.Requests, "sent again")
			assert.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)
			continue
		}
		assert.Equal(t, 2, l.Effects["order-41"], "without a Reconciler, the keyless provider charges the retry")
	}
}

// With a Reconciler, net/http never re-sends an attempt on its own, not even a bodiless
// POST (a capture) whose kept-alive connection broke after the request was written: the
// Reconciler is asked first, and finds the effect.
func TestReconcileNoSilentReplay(t *testing.T) {
	for _, body := range []string{"", `{"amount":1}`} {
		var effects, posts atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				w.WriteHeader(http.StatusOK)
				return
			}
			io.Copy(io.Discard, r.Body)
			effects.Add(1) // the provider ignores keys: every POST captures
			if posts.Add(1) == 1 {
				hangUp(w)
				return
			}
			w.WriteHeader(http.StatusCreated)
		}))
		t.Cleanup(srv.Close)
		r := &reconciler{answer: func(*Record, bool) (Reconciliation, error) {
			if effects.Load() > 0 {
				return Reconciliation{Response: found()}, nil
			}
			return Reconciliation{Send: true}, nil
		}}
		tr, _ := memTransport(t, &Options{InitialInterval: time.Millisecond, Reconcile: r.reconcile})
		tr.clock = realClock{}
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		tr.cfg.Base = base
		warm, _ := http.NewRequest(http.MethodGet, srv.URL+"/payments/x", nil) // a kept-alive connection
		resp, err := base.RoundTrip(warm)
		require.NoError(t, err)
		resp.Body.Close()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments/pay_1/capture", strings.NewReader(body))
		resp, err = tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.EqualValues(t, 1, effects.Load(), "body %q: captured again without asking the Reconciler", body)
		assert.EqualValues(t, 1, r.calls.Load(), "body %q", body)
	}
}
