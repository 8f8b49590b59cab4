// Resume fairness (resume_fair.go, resume_pass.go): a host that accepts
// connections and never answers cannot hold every ResumeConcurrency slot
// while another host has due work, in Resume and in the background resumer.

package idem

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// deadServer accepts connections and reads requests, and never answers: each
// handler is held until the test ends. hanging counts the requests held.
type deadServer struct {
	*httptest.Server
	hanging atomic.Int64
	release chan struct{}
}

func newDeadServer(tb testing.TB) *deadServer {
	tb.Helper()
	s := &deadServer{release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.hanging.Add(1)
		defer s.hanging.Add(-1)
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
	}))
	var once sync.Once
	tb.Cleanup(func() {
		once.Do(func() { close(s.release) })
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

// writePending journals a pending operation for url that no attempt has
// reached yet, as a crashed run leaves it.
func writePending(tb testing.TB, j *Journal, url, ref string, at time.Time) {
	tb.Helper()
	body := []byte(paymentBody(ref, 100))
	require.NoError(tb, j.insert(&Record{Key: "key-" + ref, OperationID: ref + "/charge", Method: http.MethodPost,
		URL: url + "/payments", Header: http.Header{"Content-Type": {"application/json"}}, Body: body,
		BodySHA256: bodySum(body), Created: at, Updated: at, State: Pending}, true))
}

// After a restart, ten operations for a dead host are listed before one for
// a healthy host. Under the default options (ResumeConcurrency 8), the
// healthy one settles while the dead ones still hang in their first attempt.
func TestResumeDeadHostDoesNotHoldEverySlot(t *testing.T) {
	dead := newDeadServer(t)
	pay := testserver.NewServer(&testserver.Options{RequireKey: true})
	t.Cleanup(pay.Close)
	j, _ := testJournal(t)
	now := time.Now()
	for i := range 10 {
		writePending(t, j, dead.URL, fmt.Sprintf("dead-%d", i), now)
	}
	writePending(t, j, pay.URL, "healthy", now)

	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, err := NewTransport(j, &Options{Base: base})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	settled := make(chan Outcome, 1)
	var deadOutcomes atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- tr.Resume(ctx, func(o Outcome) {
			if o.Response != nil {
				o.Response.Body.Close()
			}
			if o.Record != nil && o.Record.OperationID == "healthy/charge" {
				settled <- o
			} else {
				deadOutcomes.Add(1)
			}
		})
	}()
	select {
	case o := <-settled:
		require.NoError(t, o.Err)
		require.Equal(t, http.StatusCreated, o.Response.StatusCode)
	case <-time.After(10 * time.Second):
		t.Fatalf("the healthy host's operation waited behind the dead host's (%d hanging)", dead.hanging.Load())
	}
	// Its slot went on to a dead operation; none of them has timed out.
	eventually(t, 5*time.Second, func() bool { return dead.hanging.Load() == DefaultResumeConcurrency },
		"the dead host's operations fill the slots")
	require.Zero(t, deadOutcomes.Load(), "no dead operation has ended")
	require.NoError(t, pay.Ledger().Check([]string{"healthy"}))

	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 10, countState(t, j, Pending), "the dead host's operations stay pending")
}

// A background resumer is sending eight operations to a dead host when an
// operation for a healthy host comes due. The next pass queues it, and one
// of the dead host's operations gives its slot up after its attempt times
// out: the healthy one waits at most one attempt timeout, not until the
// dead host's operations have run out of attempts.
func TestResumerDeadHostYieldsAfterOneAttempt(t *testing.T) {
	const attemptTimeout = 300 * time.Millisecond
	dead := newDeadServer(t)
	pay := testserver.NewServer(&testserver.Options{RequireKey: true})
	t.Cleanup(pay.Close)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, clk := testTransport(t, &Options{Base: base, AttemptTimeout: attemptTimeout, ResumeInterval: time.Hour,
		RetryBudget: RetryBudget{Disabled: true}})
	for i := range DefaultResumeConcurrency {
		writePending(t, tr.journal, dead.URL, fmt.Sprintf("dead-%d", i), clk.Now())
	}

	c := &Client{journal: tr.journal, transport: tr}
	var mu sync.Mutex
	var settledAt time.Time
	stop := c.StartResumer(context.Background(), func(o Outcome) {
		if o.Response != nil {
			o.Response.Body.Close()
			mu.Lock()
			settledAt = time.Now()
			mu.Unlock()
		}
	})
	defer stop()
	eventually(t, 5*time.Second, func() bool { return dead.hanging.Load() == DefaultResumeConcurrency },
		"the dead host holds every slot")

	// A healthy operation comes due, as after a call's give-up.
	writePending(t, tr.journal, pay.URL, "healthy", clk.Now())
	due := time.Now()
	tr.resumers.notePending(clk.Now())
	eventually(t, 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !settledAt.IsZero()
	}, "the healthy operation settles")
	mu.Lock()
	waited := settledAt.Sub(due)
	mu.Unlock()
	// One attempt timeout, and some slack for a busy machine; the dead
	// host's operations alone run DefaultMaxAttempts attempts each.
	require.Less(t, waited, 3*attemptTimeout, "waited %v behind the dead host", waited)
	require.NoError(t, pay.Ledger().Check([]string{"healthy"}))
	stop()
}

// The pool's choice: a lone host uses every slot; with two hosts, each
// free slot goes to the one with fewer being sent, and yield asks the host
// over its share to give one up.
func TestFairPoolSharesSlots(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	started := map[string]int{}
	p := newFairPool(4, 3, func(host string, rec *Record) {
		mu.Lock()
		started[host]++
		mu.Unlock()
		<-release
	})
	count := func(h string) int {
		mu.Lock()
		defer mu.Unlock()
		return started[h]
	}
	for i := range 3 {
		require.True(t, p.add("a", &Record{ID: uint64(1 + i)}))
	}
	require.False(t, p.add("a", &Record{ID: 4}), "a's queue is full")
	require.True(t, p.add("a", &Record{ID: 1}), "already queued: not queued twice")
	p.pump()
	eventually(t, 2*time.Second, func() bool { return count("a") == 3 }, "a alone uses the slots it needs")
	require.False(t, p.yield("a"), "a slot is free")

	require.True(t, p.add("b", &Record{ID: 10}))
	require.True(t, p.add("b", &Record{ID: 11}))
	p.pump()
	eventually(t, 2*time.Second, func() bool { return count("b") == 1 }, "b gets the free slot")
	require.True(t, p.yield("a"), "a holds 3 of 4 slots while b waits with 1")
	require.False(t, p.yield("b"))
	close(release)
	p.wait()
	require.Equal(t, 3, count("a"))
	require.Equal(t, 2, count("b"))
}
