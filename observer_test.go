// Tests for the Observer (observer.go): what a settle, a give-up, a resume,
// an expiry and a Close report, and that the pending gauge adds up.

package idem

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

// recordingObserver keeps every report.
type recordingObserver struct {
	NopObserver
	mu          sync.Mutex
	attempts    []AttemptEvent
	retries     []RetryEvent
	results     []ResultEvent
	pending     int
	writeAheads []error
}

func (o *recordingObserver) Attempt(_ context.Context, e AttemptEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts = append(o.attempts, e)
}

func (o *recordingObserver) Retry(_ context.Context, e RetryEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retries = append(o.retries, e)
}

func (o *recordingObserver) Result(_ context.Context, e ResultEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results = append(o.results, e)
}

func (o *recordingObserver) PendingChanged(d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending += d
}

func (o *recordingObserver) WriteAhead(_ context.Context, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		panic("negative commit latency")
	}
	o.writeAheads = append(o.writeAheads, err)
}

func (o *recordingObserver) gauge() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pending
}

func TestObserverSeesAttemptsRetriesAndSettle(t *testing.T) {
	obs := &recordingObserver{}
	tr, _, srv := memScenario(t, &Options{Observer: obs}, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			reply(w, http.StatusServiceUnavailable, "Retry-After", "1")
		case 2:
			reply(w, http.StatusInternalServerError)
		default:
			reply(w, http.StatusCreated)
		}
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	require.NoError(t, err)
	drain(t, resp)

	require.Equal(t, []error{nil}, obs.writeAheads)
	require.Len(t, obs.attempts, 3)
	for i, want := range []struct {
		status int
		class  Class
	}{{503, ClassRetry}, {500, ClassRetry}, {201, ClassFinal}} {
		a := obs.attempts[i]
		require.Equal(t, AttemptEvent{Method: "POST", Journaled: true, N: i + 1, Status: want.status, Class: want.class,
			Duration: a.Duration}, a)
	}
	require.Len(t, obs.retries, 2)
	require.Equal(t, RetryEvent{Method: "POST", Journaled: true, N: 1, Status: 503, Class: ClassRetry, Wait: time.Second, RetryAfter: true}, obs.retries[0])
	require.False(t, obs.retries[1].RetryAfter)
	require.Equal(t, []ResultEvent{{State: StateSettled, Status: 201, Attempts: 3}}, obs.results)
	require.Zero(t, obs.gauge(), "written ahead (+1), settled (-1)")

	// Unjournaled: attempts, no write-ahead, no result.
	resp, err = tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	drain(t, resp)
	require.False(t, obs.attempts[3].Journaled)
	require.Len(t, obs.results, 1)
	require.Len(t, obs.writeAheads, 1)
}

func TestObserverPendingGaugeAcrossGiveUpResumeExpiryAndClose(t *testing.T) {
	t.Parallel()
	obs := &recordingObserver{}
	fail := true
	var mu sync.Mutex
	tr, clk, srv := memScenario(t, &Options{Observer: obs, MaxAttempts: 1, KeyTTL: time.Hour}, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			reply(w, http.StatusBadGateway)
			return
		}
		reply(w, http.StatusCreated)
	})
	for range 3 {
		_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
		pendingErr(t, err)
	}
	require.Equal(t, 3, obs.gauge())
	require.Len(t, obs.results, 3)
	require.Equal(t, StatePending, obs.results[0].State)

	// A resume that settles one: -1, reported as resumed.
	mu.Lock()
	fail = false
	mu.Unlock()
	clk.Advance(time.Minute)
	require.NoError(t, tr.Resume(WithMaxAttempts(context.Background(), 1), nil))
	require.Zero(t, obs.gauge())
	last := obs.results[len(obs.results)-1]
	require.True(t, last.Resumed)
	require.Equal(t, StateSettled, last.State)

	// One that expires.
	mu.Lock()
	fail = true
	mu.Unlock()
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"b":1}`))
	pendingErr(t, err)
	require.Equal(t, 1, obs.gauge())
	clk.Advance(2 * time.Hour)
	var outs []Outcome
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 1)
	require.ErrorIs(t, outs[0].Err, ErrKeyExpired)
	require.Zero(t, obs.gauge())
	require.Equal(t, ResultEvent{State: StateExpired, Status: 502, Attempts: 1, Resumed: true}, obs.results[len(obs.results)-1])
}

// A Client opened over a journal that holds pending operations adds them to
// the gauge, and takes them off when it is closed.
func TestObserverGaugeStartsFromTheJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	srv := newRecordingServer(t, nil, func(n int, w http.ResponseWriter, r *http.Request) { reply(w, http.StatusServiceUnavailable) })
	c, err := Open(path, &Options{Base: srv.base(), MaxAttempts: 1})
	require.NoError(t, err)
	for range 2 {
		_, err := c.HTTPClient().Post(srv.URL, "application/json", nil)
		var pe *PendingError
		require.True(t, errors.As(err, &pe))
	}
	require.NoError(t, c.Close())

	obs := &recordingObserver{}
	c, err = Open(path, &Options{Observer: obs})
	require.NoError(t, err)
	require.Equal(t, 2, obs.gauge())
	require.NoError(t, c.Close())
	require.Zero(t, obs.gauge())
	require.NoError(t, c.Close())
	require.Zero(t, obs.gauge(), "a second Close reports nothing")
}

func TestObserverWriteAheadFailure(t *testing.T) {
	obs := &recordingObserver{}
	tr, _, srv := newScenario(t, &Options{Observer: obs}, func(n int, w http.ResponseWriter, r *http.Request) { reply(w, http.StatusCreated) })
	require.NoError(t, tr.bolt().Close())
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	require.ErrorIs(t, err, journal.ErrClosed)
	require.Len(t, obs.writeAheads, 1)
	require.ErrorIs(t, obs.writeAheads[0], journal.ErrClosed)
	require.Zero(t, obs.gauge())
	require.Zero(t, srv.count())
}
