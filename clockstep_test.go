// Clock steps between a give-up and a restart (clockstep.go, due.go,
// expiry.go): the wall clock set back or forward must neither hold an
// operation back longer than the wait idem chose, nor let an operation look
// younger than KeyTTL allows.

package idem

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// restartAt builds a second Transport over tr's journal, as a restarted
// process would, whose stepClock reads a fake wall clock set to at.
func restartAt(tb testing.TB, tr *Transport, at time.Time) (*Transport, *fakeClock) {
	tb.Helper()
	tr2, err := NewTransport(tr.journal, &tr.cfg.Options)
	require.NoError(tb, err)
	clk := &fakeClock{now: at}
	tr2.clock = newStepClock(clk)
	return tr2, clk
}

// giveUpOnRetryAfter makes one call that the server answers 429 with
// Retry-After: 2, and returns the operation's pending error: MaxAttempts is
// 1, so the call gives up at once with a next attempt 2 s later.
func giveUpOnRetryAfter(t *testing.T) (*Transport, *recordingServer, *PendingError) {
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			reply(w, http.StatusTooManyRequests, "Retry-After", "2")
			return
		}
		reply(w, http.StatusCreated)
	})
	ctx := WithOperationID(context.Background(), "order-1/charge")
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
	pe := pendingErr(t, err)
	rec := onlyRecord(t, tr)
	require.Equal(t, 2*time.Second, rec.NextAttempt.Sub(rec.LastAttempt))
	return tr, srv, pe
}

// The clock is set back an hour between the give-up and the restart. The
// 2 s Retry-After holds the operation back 2 s, not an hour and 2 s.
func TestClockStepBackResumeWaitsOnlyTheChosenWait(t *testing.T) {
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr2, clk := restartAt(t, tr, pe.NextAttempt.Add(-time.Hour))

	var got outcomes
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Equal(t, 1, srv.count(), "not sent before the server's 2 s")
	require.Empty(t, got.all())

	clk.Advance(2*time.Second + time.Millisecond)
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Equal(t, 1, got.settled(), "sent 2 s after the restart, not an hour later: %v", got.all())
	require.Equal(t, 2, srv.count())
	sameKey(t, srv.requests())
}

// A call that repeats the operation ID after the step gets the 2 s wait in
// its PendingError, then sends once it has passed.
func TestClockStepBackCallWaitsOnlyTheChosenWait(t *testing.T) {
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr2, clk := restartAt(t, tr, pe.NextAttempt.Add(-time.Hour))
	call := func() (*http.Response, error) {
		ctx := WithOperationID(context.Background(), "order-1/charge")
		return tr2.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).WithContext(ctx))
	}
	_, err := call()
	pe2 := pendingErr(t, err)
	require.LessOrEqual(t, pe2.NextAttempt.Sub(tr2.clock.Now()), 2*time.Second, "the Transport's time, not the stepped wall clock")

	clk.Advance(2*time.Second + time.Millisecond)
	resp, err := call()
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	drain(t, resp)
	sameKey(t, srv.requests())
}

// The background resumer of the restarted process wakes for the operation
// 2 s after the step, not at its poll interval or an hour later.
func TestClockStepBackResumerWakesAtTheChosenWait(t *testing.T) {
	checkGoroutines(t)
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr.cfg.ResumeInterval = time.Hour
	tr2, clk := restartAt(t, tr, pe.NextAttempt.Add(-time.Hour))
	c := &Client{journal: tr2.journal, transport: tr2}
	var got outcomes
	stop := c.StartResumer(context.Background(), got.add)
	defer stop()
	eventually(t, 2*time.Second, func() bool { return clk.Timers() == 1 }, "the resumer sleeps")
	require.LessOrEqual(t, clk.NextTimer().Sub(clk.Now()), 2*time.Second, "it sleeps for the chosen wait only")

	clk.Advance(2*time.Second + time.Millisecond)
	eventually(t, 2*time.Second, func() bool { return got.settled() == 1 }, "resumed after the chosen wait")
	require.Equal(t, 2, srv.count())
	stop()
	srv.CloseClientConnections()
}

// The clock is set back 2 h after an operation has been pending 23 h. Wall
// time says it is 21 h old; it has been pending at least 23 h, so 2 h 1 min
// later it is past KeyTTL (24 h) and is not sent, where the wall clock alone
// would call it 23 h 1 min old and re-send it after the server forgot it.
func TestClockStepBackKeyTTLNotExtended(t *testing.T) {
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	tr.clock = newStepClock(clk)
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
	pendingErr(t, err)
	created := onlyRecord(t, tr).Created

	clk.Advance(23 * time.Hour)
	require.NoError(t, tr.Resume(context.Background(), nil)) // a retry at 23 h, answered 503
	require.Equal(t, 2, srv.count())
	require.Equal(t, created.Add(23*time.Hour), onlyRecord(t, tr).LastAttempt)

	tr2, clk2 := restartAt(t, tr, created.Add(21*time.Hour)) // 2 h back
	var got outcomes
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Empty(t, got.all(), "not due yet: the backoff runs from the last attempt")
	// The wall clock now says 23 h 1 min: past the next attempt, and within
	// KeyTTL for the wall clock alone.
	clk2.Advance(2*time.Hour + time.Minute)
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Len(t, got.all(), 1)
	require.ErrorIs(t, got.all()[0].Err, ErrKeyExpired)
	require.Equal(t, 2, srv.count(), "not sent past KeyTTL")
	require.Equal(t, Expired, onlyRecord(t, tr2).State)
}

// A step forward makes records look older: an operation expires early,
// which is the safe side (ErrKeyExpired: reconcile, nothing sent).
func TestClockStepForwardExpiresEarlyNothingSent(t *testing.T) {
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr2, _ := restartAt(t, tr, pe.NextAttempt.Add(DefaultKeyTTL))
	var got outcomes
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	require.Len(t, got.all(), 1)
	require.True(t, errors.Is(got.all()[0].Err, ErrKeyExpired))
	require.Equal(t, 1, srv.count())
}

// stepClock never reads earlier than a time it returned or observed, and
// after a step back runs on at the wall clock's rate; a forward step is
// taken as it is.
func TestStepClockRatchets(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := &fakeClock{now: start}
	c := newStepClock(clk)
	require.Equal(t, start, c.Now())

	clk.Advance(-time.Hour)
	require.Equal(t, start, c.Now(), "a step back is absorbed")
	clk.Advance(time.Second)
	require.Equal(t, start.Add(time.Second), c.Now(), "and time runs on from there")

	c.observe(start.Add(time.Minute)) // a journal time in the future
	require.Equal(t, start.Add(time.Minute), c.Now())

	clk.Advance(time.Hour)
	require.Equal(t, start.Add(time.Hour+time.Minute), c.Now(), "a step forward is taken")

	clk.Advance(-stepTolerance / 2) // goroutines' readings out of order: no step
	require.Equal(t, start.Add(time.Hour+time.Minute-stepTolerance/2), c.Now())
}

// keyExpired and dueAt, the one rule each, across both directions of a step.
func TestKeyExpiredAndDueAtAcrossSteps(t *testing.T) {
	cfg, err := (&Options{KeyTTL: time.Hour, MaxInterval: 10 * time.Second, MaxRetryAfter: 20 * time.Second}).config()
	require.NoError(t, err)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &Record{Created: t0, Updated: t0, LastAttempt: t0.Add(30 * time.Minute),
		NextAttempt: t0.Add(30*time.Minute + 5*time.Second)}

	require.False(t, keyExpired(rec, t0.Add(time.Hour), time.Hour), "exactly KeyTTL old is not past it")
	require.True(t, keyExpired(rec, t0.Add(time.Hour+time.Nanosecond), time.Hour))
	require.False(t, keyExpired(rec, t0.Add(-time.Hour), time.Hour), "dated in the future: aged from its last write")

	require.Equal(t, rec.NextAttempt, cfg.dueAt(rec, t0.Add(30*time.Minute)))
	back := t0.Add(-24 * time.Hour) // the clock went back a day, before LastAttempt
	require.Equal(t, back.Add(5*time.Second), cfg.dueAt(rec, back), "held back the chosen 5 s, from now")
	require.Equal(t, t0.Add(2*time.Hour), cfg.dueAt(rec, t0.Add(2*time.Hour)), "past KeyTTL: due at once")

	// The server's long Retry-After (S02) stands: 1 h chosen, 1 h from now.
	long := &Record{Created: t0, LastAttempt: t0, NextAttempt: t0.Add(50 * time.Minute)}
	require.Equal(t, back.Add(50*time.Minute), cfg.dueAt(long, back))
	// A next attempt with no last attempt waits at most max(MaxRetryAfter, MaxInterval).
	odd := &Record{Created: t0, NextAttempt: t0.Add(50 * time.Minute)}
	require.Equal(t, t0.Add(20*time.Second), cfg.dueAt(odd, t0))
}
