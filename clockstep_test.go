// Clock steps between a give-up and a restart (clockstep.go, due.go,
// expiry.go): the wall clock set back or forward must neither hold an
// operation back longer than the wait idem chose, nor let an operation look
// younger than KeyTTL allows.

package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// restartAt builds a second Transport over tr's journal, as a restarted
// process would, whose stepClock reads a fake wall clock set to at.
func restartAt(tb testing.TB, tr *Transport, at time.Time) (*Transport, *fakeClock) {
	tb.Helper()
	tr2, err := NewTransport(tr.bolt(), &tr.cfg.Options)
	require.NoError(tb, err)
	clk := &fakeClock{now: at}
	tr2.clock = journalClock(clk, tr.bolt()) // as NewTransport's
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
	leakcheck.Check(t)
	tr, srv, pe := giveUpOnRetryAfter(t)
	tr.cfg.ResumeInterval = time.Hour
	tr2, clk := restartAt(t, tr, pe.NextAttempt.Add(-time.Hour))
	c := &Client{journal: tr2.bolt(), transport: tr2}
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
	require.Equal(t, StateExpired, onlyRecord(t, tr2).State)
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

// stallClock is a wall clock whose Now can be made to stall after it has
// read the time and before it returns it, as a goroutine preempted (GC,
// CPU throttling, SIGSTOP) between the two does.
type stallClock struct {
	mu    sync.Mutex
	now   time.Time
	stall chan struct{} // non-nil: the next Now waits on it after reading
	read  chan struct{} // closed once the stalled Now has read
}

func (c *stallClock) Now() time.Time {
	c.mu.Lock()
	v, stall, read := c.now, c.stall, c.read
	c.stall = nil
	c.mu.Unlock()
	if stall != nil {
		close(read)
		<-stall
	}
	return v
}

func (c *stallClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *stallClock) Sleep(context.Context, time.Duration) error { return nil }
func (c *stallClock) After(time.Duration) (<-chan time.Time, func()) {
	return make(chan time.Time), func() {}
}

// A goroutine reads the wall clock and stalls for 5 s before the stepClock
// compares its reading; meanwhile another reads the clock. The stale
// reading is not a step back of the wall clock: the clock was never set.
// Before the fix stepClock took it for one and added 5 s of skew to every
// later reading, for good; every such stall moved idem's time further ahead
// of the wall clock (records look older than they are, Retry-After dates
// nearer). Now a reading that looks like a step is taken again first.
func TestStepClockStalledReaderIsNoStep(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	wall := &stallClock{now: start}
	c := newStepClock(wall)
	c.Now()

	release := make(chan struct{})
	wall.mu.Lock()
	wall.stall, wall.read = release, make(chan struct{})
	read := wall.read
	wall.mu.Unlock()
	done := make(chan time.Time)
	go func() { done <- c.Now() }() // reads start, then stalls
	<-read
	wall.advance(5 * time.Second)
	c.Now() // another goroutine, on time
	close(release)
	<-done

	wall.advance(time.Second)
	if got, want := c.Now(), start.Add(6*time.Second); got.Sub(want) > stepTolerance {
		t.Fatalf("idem's clock reads %v, the wall clock %v: %v ahead after one stalled reading", got, want, got.Sub(want))
	}
}

// The wall clock is set back two days while the process is down (a machine
// whose clock starts behind until NTP syncs). After the restart, before
// anything has read the journal, a new operation is written ahead; the
// server answers 503 and it stays pending. The startup Resume then reads an
// older pending record. Before the fix the new Transport's clock had seen
// no journal time yet: the new operation was dated two days back, the clock
// jumped ahead by the step at the read, and the operation, a minute old,
// looked two days old and expired (ErrKeyExpired, never sent again). Now
// the clock starts from the newest time the journal holds.
func TestClockStepBackBeforeFirstReadKeepsNewOperation(t *testing.T) {
	t.Parallel()
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	tr.clock = newStepClock(clk)
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).
		WithContext(WithOperationID(context.Background(), "old")))
	pendingErr(t, err)
	old := onlyRecord(t, tr)

	tr2, clk2 := restartAt(t, tr, old.Created.Add(-48*time.Hour)) // two days back
	_, err = tr2.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload).
		WithContext(WithOperationID(context.Background(), "new")))
	pendingErr(t, err)
	clk2.Advance(time.Minute) // past the new operation's backoff
	var got outcomes
	require.NoError(t, tr2.Resume(context.Background(), got.add))
	seen := false
	for _, o := range got.all() {
		if o.Record.OperationID == "new" {
			seen = true
			require.NotErrorIs(t, o.Err, ErrKeyExpired, "an operation a minute old expired")
		}
	}
	require.True(t, seen, "the new operation was resumed")
}

// The newest time a journal holds survives a reopen: a Transport built over
// the reopened journal starts from it, whatever the wall clock says. It is
// not the time of the last record of either bucket: the first operation
// settles last. (boltjournal's TestWrittenScannedWhenMissing has a file
// written before the time was kept.)
func TestJournalNewestTimeSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)
	newest := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	var recs []*Record
	for i, at := range []time.Time{newest.Add(-2 * time.Hour), newest.Add(-time.Hour)} {
		rec := &Record{Key: fmt.Sprintf("key-%d", i), Method: http.MethodPost, URL: "https://pay.example/payments",
			Body: []byte("{}"), Created: at, Updated: at, State: StatePending}
		require.NoError(t, insertRec(j, rec, true))
		recs = append(recs, rec)
	}
	recs[1].State, recs[1].Updated = StateSettled, newest.Add(-30*time.Minute)
	require.NoError(t, saveRec(j, recs[1]))
	recs[0].State, recs[0].Updated = StateSettled, newest
	require.NoError(t, saveRec(j, recs[0]))
	require.NoError(t, j.Close())

	reopen := func() *boltjournal.Journal {
		j, err := boltjournal.Open(path, nil)
		require.NoError(t, err)
		t.Cleanup(func() { j.Close() })
		return j
	}
	j = reopen()
	require.Equal(t, newest, j.LatestWritten().UTC(), "the first operation's settle")
	clk := &fakeClock{now: newest.Add(-48 * time.Hour)} // set back two days
	require.False(t, journalClock(clk, j).Now().Before(newest), "a clock over the journal reads no earlier")
}
