// Tests for resume_pick.go: a record's host read from its target's origin
// as from the whole URL, and a Resume that builds each pending record once,
// its scans passing over the records of a full host without the journal
// building them.

package idem

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

// The host from a target's origin is the host from the whole of it, as
// budgetHost reads a request's URL.
func TestRecordHostFromOrigin(t *testing.T) {
	for _, target := range []string{
		"https://api.test/v1/payments?mode=live",
		"http://API.Test/p",
		"https://api.test",
		"https://api.test?x=1",
		"https://api.test:8443/p",
		"http://127.0.0.1:8080/orders/7",
		"http://[::1]:9000/p",
		"https://[2001:db8::1]/p",
		"HTTPS://api.test/p#frag",
		"https://xn--caf-dma.test/p",
	} {
		u, err := url.Parse(target)
		require.NoError(t, err)
		require.Equal(t, budgetHost(u), recordHost(&Record{URL: target}), target)
		require.Equal(t, budgetHost(u), recordHost(&Record{URL: "https://elsewhere.test/p", Location: target}), "moved to %s", target)
		host, ok := originHosts{}.of([]byte(target))
		require.True(t, ok, target)
		require.Equal(t, budgetHost(u), host, target)
	}
	for _, target := range []string{"", "/p", "api.test/p", "://api.test/p", "1http://api.test/p", "https:/api.test"} {
		_, ok := originOf(target)
		require.False(t, ok, "%q has no origin", target)
	}
}

// countingPicker is a Store whose picked listings count the records they
// build (yield) and those they take (copy out of the file).
type countingPicker struct {
	journal.Store // a Picker
	built, taken  atomic.Int64
}

func (s *countingPicker) PendingPicked(ctx context.Context, after uint64, pick func(uint64, []byte) journal.Pick) iter.Seq2[*Record, error] {
	counted := func(seq uint64, target []byte) journal.Pick {
		p := pick(seq, target)
		if p == journal.Take {
			s.taken.Add(1)
		}
		return p
	}
	return func(yield func(*Record, error) bool) {
		for rec, err := range s.Store.(journal.Picker).PendingPicked(ctx, after, counted) {
			if err == nil {
				s.built.Add(1)
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

// A backlog of one host several queues long, then a few operations of a
// second host: the first scan queues the second host's at once (fairness),
// and over the whole Resume each record is copied out of the file and
// built once, not once per scan that passes over it.
func TestResumeBuildsEachRecordOnce(t *testing.T) {
	t.Parallel()
	const many, few = 4*resumePage + 10, 5
	j, _ := testJournal(t)
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, many+few)
	for w := range 32 { // concurrent inserts share commits
		wg.Go(func() {
			for i := w; i < many; i += 32 {
				errs <- insertRec(j, &Record{Key: fmt.Sprintf("a-%d", i), Method: http.MethodPost,
					URL: fmt.Sprintf("https://a.example/payments/%d", i), Body: []byte("{}"),
					Created: now, Updated: now, State: StatePending}, true)
			}
		})
	}
	wg.Wait()
	for i := range few {
		errs <- insertRec(j, &Record{Key: fmt.Sprintf("b-%d", i), Method: http.MethodPost,
			URL: "https://b.example/payments", Body: []byte("{}"), Created: now, Updated: now, State: StatePending}, true)
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	store := &countingPicker{Store: j}
	tr, _ := transportWith(t, store, nil)

	gate := make(chan struct{})
	var mu sync.Mutex
	sent := map[uint64]int{}
	run := tr.newResumeRun(context.Background(), limits{}, nil, nil, func(time.Time) {})
	run.pool = newFairPool(4, resumePage, func(_ string, rec *Record) {
		<-gate
		mu.Lock()
		sent[seqOf(rec)]++
		mu.Unlock()
	})
	done := make(chan error, 1)
	go func() { done <- run.all() }()
	eventually(t, 10*time.Second, func() bool {
		run.pool.mu.Lock()
		defer run.pool.mu.Unlock()
		return len(run.pool.queues["b.example:443"]) == few
	}, "the first scan queues the second host's operations")
	close(gate)
	require.NoError(t, <-done)
	require.Len(t, sent, many+few, "every operation sent")
	for id, n := range sent {
		require.Equal(t, 1, n, "record %d sent %d times", id, n)
	}
	require.Equal(t, int64(many+few), store.taken.Load(), "records copied out of the file")
	require.Equal(t, int64(many+few), store.built.Load(), "records built")
}

// A scan's pick may leave a host out without the pool refusing it a record
// (its queue had room for what was taken, and some of that was not due):
// waiting for room then returns at once if the host has room already, and
// else once its queue is half empty, as after a refusal.
func TestWaitRoomAfterPickLeftHostOut(t *testing.T) {
	t.Parallel()
	tr, _ := testTransport(t, nil)
	run := tr.newResumeRun(context.Background(), limits{}, nil, nil, func(time.Time) {})
	const host = "a.example:443"
	left := &leftOut{}
	left.hold(host, 1000)
	waited := make(chan bool, 1)
	go func() { waited <- run.waitRoom(left) }()
	select {
	case ok := <-waited:
		require.True(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("waited for room an empty queue has")
	}

	for i := range resumePage - 10 {
		require.True(t, run.pool.add(host, seqRec(uint64(i+1))).ok)
	}
	go func() { waited <- run.waitRoom(left) }()
	eventually(t, 10*time.Second, func() bool {
		run.pool.mu.Lock()
		defer run.pool.mu.Unlock()
		return run.pool.full[host]
	}, "waiting marks the host's queue full, to be told of room")
	run.pool.mu.Lock()
	for len(run.pool.queues[host]) > resumePage/2 {
		run.pool.next()
	}
	run.pool.mu.Unlock()
	select {
	case ok := <-waited:
		require.True(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("not told of room once the queue was half empty")
	}
}
