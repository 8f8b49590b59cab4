// Tests for the background resumer (resumer.go): the service-like acceptance
// test (server down, then up), waking at a Retry-After and at a call's
// give-up on a fake clock, and clean stops by ctx, stop and Close.

package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// The acceptance test: a service sends payments while its payments server is
// down; they go pending. The server comes up; the background resumer settles
// every one of them without a restart, exactly once, and Close leaves no
// goroutine behind.
func TestResumerSettlesPendingWhenServerComesBack(t *testing.T) {
	leakcheck.Check(t)
	addr := freeAddr(t)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	c, err := Open(filepath.Join(t.TempDir(), "svc.journal"), &Options{Base: base,
		MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: 20 * time.Millisecond,
		ResumeInterval: 200 * time.Millisecond, ResumeConcurrency: 4})
	require.NoError(t, err)
	defer c.Close()

	var got outcomes
	stop := c.StartResumer(context.Background(), got.add)
	defer stop()

	// The service's workers: every payment goes pending while the server is down.
	const down = 12
	var refs []string
	var wg sync.WaitGroup
	for i := range down {
		ref := fmt.Sprintf("order-%d", i)
		refs = append(refs, ref)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := WithOperationID(context.Background(), ref+"/charge")
			req, _ := paymentRequest(t, ctx, "http://"+addr, ref, 100+i)
			_, err := c.HTTPClient().Do(req)
			var pe *PendingError
			if !errors.As(err, &pe) {
				t.Errorf("%s: want a *PendingError while the server is down, got %v", ref, err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, down, countState(t, c.Journal(), StatePending))

	// The server comes up on the address the journal names.
	srv, err := testserver.Listen(addr, &testserver.Options{RequireKey: true})
	require.NoError(t, err)
	defer srv.Close()

	// The service carries on meanwhile.
	for i := range 3 {
		ref := fmt.Sprintf("order-up-%d", i)
		refs = append(refs, ref)
		req, _ := paymentRequest(t, WithOperationID(context.Background(), ref+"/charge"), srv.URL, ref, 7)
		resp, err := c.HTTPClient().Do(req)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}

	eventually(t, 10*time.Second, func() bool { return got.settled() == down },
		"the resumer settled %d of %d", got.settled(), down)
	require.NoError(t, srv.Ledger().Check(refs), "exactly once, after the resumer")
	require.Zero(t, countState(t, c.Journal(), StatePending))
	for _, out := range got.all() {
		var pe *PendingError
		require.True(t, out.Response != nil || errors.As(out.Err, &pe), "unexpected outcome %v", out.Err)
	}

	stop()
	require.NoError(t, c.Close())
	srv.Close()
	base.CloseIdleConnections()
	// leakcheck.Check's cleanup proves nothing is left.
}

// A server's Retry-After far beyond MaxRetryAfter leaves the operation
// pending with that time; the resumer sends it then, not before, and not at
// its (long) poll interval.
func TestResumerWakesAtRetryAfter(t *testing.T) {
	leakcheck.Check(t)
	tr, clk, srv := newScenario(t, &Options{ResumeInterval: time.Hour}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			reply(w, http.StatusServiceUnavailable, "Retry-After", "600")
			return
		}
		reply(w, http.StatusCreated)
	})
	c := &Client{journal: tr.bolt(), transport: tr}
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"a":1}`))
	require.Nil(t, resp)
	pe := pendingErr(t, err)
	require.Equal(t, 10*time.Minute, pe.NextAttempt.Sub(clk.Now()))

	var got outcomes
	stop := c.StartResumer(context.Background(), got.add)
	defer stop()
	eventually(t, 10*time.Second, func() bool { return clk.Timers() == 1 }, "the resumer sleeps")
	clk.Advance(9 * time.Minute)
	eventually(t, 10*time.Second, func() bool { return clk.Timers() == 1 }, "the resumer sleeps again")
	// That pass is over; wait for any send it started, so that one sent too
	// early is counted below rather than missed by a short real sleep.
	resumers := c.transport.resumers.all()
	require.Len(t, resumers, 1)
	resumers[0].run.pool.wait()
	require.Equal(t, 1, srv.count(), "nothing sent before the server's time")

	clk.Advance(time.Minute)
	eventually(t, 10*time.Second, func() bool { return got.settled() == 1 }, "resumed at the server's time")
	require.Equal(t, 2, srv.count())
	sameKey(t, srv.requests())
	require.Equal(t, StateSettled, onlyRecord(t, tr).State)
	stop()
	srv.CloseClientConnections()
}

// An operation that a call leaves pending after the resumer went to sleep
// wakes it at the operation's next-attempt time, not at the next poll.
func TestResumerWakesWhenACallLeavesPending(t *testing.T) {
	leakcheck.Check(t)
	tr, clk, srv := newScenario(t, &Options{ResumeInterval: time.Hour, MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			reply(w, http.StatusBadGateway)
			return
		}
		reply(w, http.StatusCreated)
	})
	c := &Client{journal: tr.bolt(), transport: tr}
	var got outcomes
	stop := c.StartResumer(context.Background(), got.add)
	defer stop()
	eventually(t, 10*time.Second, func() bool { return clk.Timers() == 1 }, "the resumer sleeps")

	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"a":2}`))
	pe := pendingErr(t, err)
	require.Less(t, pe.NextAttempt.Sub(clk.Now()), time.Minute)
	eventually(t, 10*time.Second, func() bool {
		next := clk.NextTimer()
		return !next.IsZero() && next.Before(clk.Now().Add(time.Minute))
	}, "the resumer re-arms for the operation's next attempt")

	clk.Advance(time.Minute)
	eventually(t, 10*time.Second, func() bool { return got.settled() == 1 }, "resumed well before the hourly poll")
	sameKey(t, srv.requests())
	stop()
	srv.CloseClientConnections()
}

// An operation the resumer could not send (PrepareResume failed) is tried
// again at the next poll, ResumeInterval later, not in a tight loop.
func TestResumerRetriesUnsendableAtInterval(t *testing.T) {
	leakcheck.Check(t)
	var prepares atomic.Int32
	tr, clk, srv := newScenario(t, &Options{ResumeInterval: time.Minute, MaxAttempts: 1,
		PrepareResume: func(r *http.Request) error {
			if prepares.Add(1) == 1 {
				return errors.New("token service down")
			}
			r.Header.Set("Authorization", "Bearer fresh")
			return nil
		}}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	req := newRequest(t, http.MethodPost, srv.URL, `{"a":5}`)
	req.Header.Set("Authorization", "Bearer stale")
	_, err := tr.RoundTrip(req)
	pe := pendingErr(t, err)
	clk.Advance(time.Until(pe.NextAttempt) + time.Second) // due now

	c := &Client{journal: tr.bolt(), transport: tr}
	var got outcomes
	stop := c.StartResumer(context.Background(), got.add)
	defer stop()
	eventually(t, 10*time.Second, func() bool { return len(got.all()) == 1 }, "first pass")
	require.ErrorContains(t, got.all()[0].Err, "token service down")
	eventually(t, 10*time.Second, func() bool { return clk.Timers() == 1 }, "the resumer sleeps")
	require.Equal(t, clk.Now().Add(time.Minute), clk.NextTimer(), "next pass at the poll interval")
	require.EqualValues(t, 1, prepares.Load())

	clk.Advance(time.Minute)
	eventually(t, 10*time.Second, func() bool { return got.settled() == 1 }, "second pass sends it")
	require.Equal(t, "Bearer fresh", srv.requests()[1].Header.Get("Authorization"))
	stop()
	srv.CloseClientConnections()
}

// ctx ending, stop and Close each end the resumer's goroutine.
func TestResumerStops(t *testing.T) {
	for _, how := range []string{"ctx", "stop", "close", "stop-then-close"} {
		t.Run(how, func(t *testing.T) {
			leakcheck.Check(t)
			c, err := Open(filepath.Join(t.TempDir(), "j"), &Options{ResumeInterval: time.Hour})
			require.NoError(t, err)
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := c.StartResumer(ctx, nil)
			switch how {
			case "ctx":
				cancel()
			case "stop":
				stop()
			case "close":
				require.NoError(t, c.Close())
			case "stop-then-close":
				stop()
				stop()
				require.NoError(t, c.Close())
				stop()
			}
			eventually(t, 10*time.Second, func() bool { return len(c.transport.resumers.all()) == 0 }, "resumer gone")
		})
	}
}

func TestStartResumerAfterCloseStartsNothing(t *testing.T) {
	leakcheck.Check(t)
	c, err := Open(filepath.Join(t.TempDir(), "j"), nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	called := false
	stop := c.StartResumer(context.Background(), func(Outcome) { called = true })
	stop()
	require.False(t, called)
	require.Empty(t, c.transport.resumers.all())
}

func TestStartResumerPanicsOnInvalidCallOption(t *testing.T) {
	c, err := Open(filepath.Join(t.TempDir(), "j"), nil)
	require.NoError(t, err)
	defer c.Close()
	require.PanicsWithValue(t, "idem: StartResumer: idem: invalid request: WithMaxAttempts(0): want at least 1", func() {
		c.StartResumer(WithMaxAttempts(context.Background(), 0), nil)
	})
}

// Close waits for an operation the resumer is sending, up to CloseTimeout.
// One that answers in time settles; one that does not is canceled and stays
// pending, to be resumed by the next Open.
func TestCloseWaitsForResumesThenLeavesThemPending(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hold  time.Duration // how long the server takes to answer the resume
		close time.Duration // CloseTimeout: 40 times the hold, or a 60th of it
		state State
	}{
		{"answers in time", 50 * time.Millisecond, 2 * time.Second, StateSettled},
		{"too slow", 5 * time.Second, 300 * time.Millisecond, StatePending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			arrived := make(chan struct{}, 1)
			tr, _, srv := newScenario(t, &Options{MaxAttempts: 1, CloseTimeout: tc.close},
				func(n int, w http.ResponseWriter, r *http.Request) {
					if n == 1 {
						reply(w, http.StatusServiceUnavailable)
						return
					}
					arrived <- struct{}{}
					select {
					case <-time.After(tc.hold):
						reply(w, http.StatusCreated)
					case <-r.Context().Done():
					}
				})
			_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"a":3}`))
			pe := pendingErr(t, err)
			tr.clock.(*fakeClock).Advance(time.Until(pe.NextAttempt) + time.Hour)

			path := tr.bolt().Path()
			c := &Client{journal: tr.bolt(), transport: tr}
			var got outcomes
			c.StartResumer(context.Background(), got.add)
			<-arrived
			start := time.Now()
			require.NoError(t, c.Close())
			require.Less(t, time.Since(start), 3*time.Second, "Close waits CloseTimeout at most, then cancels")

			j, err := boltjournal.OpenReadOnly(path, 0)
			require.NoError(t, err)
			defer j.Close()
			recs, err := j.Records()
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Equal(t, tc.state, recs[0].State)
			srv.CloseClientConnections()
		})
	}
}

// An operation in flight in a call is never sent by the resumer at the same
// time.
func TestResumerSkipsOperationsInFlight(t *testing.T) {
	leakcheck.Check(t)
	var inFlight, maxInFlight atomic.Int32
	release := make(chan struct{})
	tr, clk, srv := newScenario(t, &Options{ResumeInterval: time.Minute}, func(n int, w http.ResponseWriter, r *http.Request) {
		if v := inFlight.Add(1); v > maxInFlight.Load() {
			maxInFlight.Store(v)
		}
		defer inFlight.Add(-1)
		if n == 1 {
			<-release
		}
		reply(w, http.StatusCreated)
	})
	c := &Client{journal: tr.bolt(), transport: tr}
	done := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"a":4}`))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	eventually(t, 10*time.Second, func() bool { return srv.count() == 1 }, "the call is in flight")
	stop := c.StartResumer(context.Background(), nil)
	defer stop()
	for range 3 {
		eventually(t, 10*time.Second, func() bool { return clk.Timers() == 1 }, "the resumer sleeps")
		clk.Advance(time.Minute)
	}
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, 1, srv.count())
	require.EqualValues(t, 1, maxInFlight.Load())
	stop()
	srv.CloseClientConnections()
}
