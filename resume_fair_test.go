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

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// deadServer accepts connections and reads requests, and never answers: each
// handler is held until the test ends. hanging counts the requests held.
type deadServer struct {
	*httptest.Server
	hanging atomic.Int64
	release chan struct{}
	// most is the most attempts any one operation (idempotency key) has
	// made here.
	mu       sync.Mutex
	attempts map[string]int
	most     int
}

// mostAttempts is the most attempts one operation has made here.
func (s *deadServer) mostAttempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

func newDeadServer(tb testing.TB) *deadServer {
	tb.Helper()
	s := &deadServer{release: make(chan struct{}), attempts: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		key := r.Header.Get(DefaultKeyHeader)
		s.attempts[key]++
		s.most = max(s.most, s.attempts[key])
		s.mu.Unlock()
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
func writePending(tb testing.TB, j *boltjournal.Journal, url, ref string, at time.Time) {
	tb.Helper()
	body := []byte(paymentBody(ref, 100))
	require.NoError(tb, insertRec(j, &Record{Key: "key-" + ref, OperationID: ref + "/charge", Method: http.MethodPost,
		URL: url + "/payments", Header: http.Header{"Content-Type": {"application/json"}}, Body: body,
		BodySHA256: bodySum(body), Created: at, Updated: at, State: StatePending}, true))
}

// After a restart, ten operations for a dead host are listed before one for
// a healthy host. Under the default options (ResumeConcurrency 8), the
// healthy one settles while the dead ones still hang in their first attempt.
func TestResumeDeadHostDoesNotHoldEverySlot(t *testing.T) {
	t.Parallel()
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
	require.Equal(t, 10, countState(t, j, StatePending), "the dead host's operations stay pending")
}

// A background resumer is sending eight operations to a dead host when an
// operation for a healthy host comes due. The next pass queues it, and one
// of the dead host's operations gives its slot up after its attempt times
// out: the healthy one waits at most one attempt timeout, not until the
// dead host's operations have run out of attempts.
func TestResumerDeadHostYieldsAfterOneAttempt(t *testing.T) {
	t.Parallel()
	const attemptTimeout = time.Second
	dead := newDeadServer(t)
	pay := testserver.NewServer(&testserver.Options{RequireKey: true})
	t.Cleanup(pay.Close)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, clk := testTransport(t, &Options{Base: base, AttemptTimeout: attemptTimeout, ResumeInterval: time.Hour,
		RetryBudget: RetryBudget{Disabled: true}, CloseTimeout: 100 * time.Millisecond})
	for i := range DefaultResumeConcurrency {
		writePending(t, tr.bolt(), dead.URL, fmt.Sprintf("dead-%d", i), clk.Now())
	}

	c := &Client{journal: tr.bolt(), transport: tr}
	var mu sync.Mutex
	settledAfter := 0 // the dead host's most attempts of one operation, when the healthy one settled
	stop := c.StartResumer(context.Background(), func(o Outcome) {
		if o.Response != nil {
			o.Response.Body.Close()
			mu.Lock()
			settledAfter = dead.mostAttempts()
			mu.Unlock()
		}
	})
	defer stop()
	eventually(t, 5*time.Second, func() bool { return dead.hanging.Load() == DefaultResumeConcurrency },
		"the dead host holds every slot")

	// A healthy operation comes due, as after a call's give-up.
	writePending(t, tr.bolt(), pay.URL, "healthy", clk.Now())
	tr.resumers.notePending(clk.Now())
	eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return settledAfter > 0
	}, "the healthy operation settles")
	// Counted in the dead host's attempts, not in time, so that a busy
	// machine cannot fail it: the healthy operation got a slot after the
	// first attempt timeout (one more attempt of slack for its own send);
	// without fairness it would wait until one of the dead host's
	// operations ran all DefaultMaxAttempts attempts.
	mu.Lock()
	most := settledAfter
	mu.Unlock()
	t.Logf("the healthy operation settled when the dead host's operations had made at most %d attempts", most)
	require.LessOrEqual(t, most, 3, "the healthy operation waited %d attempts behind the dead host", most)
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
		require.True(t, p.add("a", seqRec(uint64(1+i))).ok)
	}
	require.False(t, p.add("a", seqRec(4)).ok, "a's queue is full")
	require.True(t, p.add("a", seqRec(1)).ok, "already queued: not queued twice")
	p.pump()
	eventually(t, 2*time.Second, func() bool { return count("a") == 3 }, "a alone uses the slots it needs")
	require.False(t, p.yield("a"), "a slot is free")

	require.True(t, p.add("b", seqRec(10)).ok)
	require.True(t, p.add("b", seqRec(11)).ok)
	p.pump()
	eventually(t, 2*time.Second, func() bool { return count("b") == 1 }, "b gets the free slot")
	require.True(t, p.yield("a"), "a holds 3 of 4 slots while b waits with 1")
	require.False(t, p.yield("b"))
	close(release)
	p.wait()
	require.Equal(t, 3, count("a"))
	require.Equal(t, 2, count("b"))
}

// The pool queues every host's records while its slots are busy. Choosing
// the next record must not cost a scan of every queued host: with 30,000
// hosts that made the scheduling alone take about a minute of CPU, under
// the pool's lock (quadratic), where sending took no time at all.
func TestFairPoolManyHostsLinear(t *testing.T) {
	t.Parallel()
	const hosts = 30000
	gate := make(chan struct{})
	var sent atomic.Int64
	var p *fairPool
	// Queues as long as the hosts are many, so that the pool's bound on
	// queued records (two pages, by default) leaves every host queued.
	p = newFairPool(DefaultResumeConcurrency, hosts, func(h string, _ *Record) {
		<-gate
		p.yield(h) // as each attempt of a resumed operation asks
		sent.Add(1)
	})
	for i := range hosts {
		require.True(t, p.add(fmt.Sprintf("h%d.example:443", i), seqRec(uint64(i+1))).ok)
		if (i+1)%resumePage == 0 {
			p.pump()
		}
	}
	p.pump()
	start := time.Now()
	close(gate)
	p.wait()
	took := time.Since(start)
	if sent.Load() != hosts {
		t.Fatalf("sent %d of %d", sent.Load(), hosts)
	}
	// Linear, this takes tens of milliseconds (a second or so under -race).
	if took > 10*time.Second {
		t.Fatalf("scheduling %d one-record hosts took %v", hosts, took)
	}
	t.Logf("%d hosts: %v", hosts, took)
}

// Before resume fairness, a pass held one page of pending records (and the
// ResumeConcurrency being sent) in memory, whatever the journal held. The
// pool's queues are bounded per host and in total: with one record per host
// (a webhook sender's journal after an outage), it holds at most two pages
// and the records being sent, not every host's.
func TestFairPoolQueuesBoundedAcrossHosts(t *testing.T) {
	t.Parallel()
	const hosts = 3000
	gate := make(chan struct{})
	p := newFairPool(DefaultResumeConcurrency, resumePage, func(string, *Record) { <-gate })
	refused := 0
	for i := range hosts {
		if res := p.add(fmt.Sprintf("h%d.example:443", i), seqRec(uint64(i+1))); res.poolFull {
			refused++
		}
		if (i+1)%resumePage == 0 {
			p.pump()
		}
	}
	p.mu.Lock()
	held := len(p.known)
	p.mu.Unlock()
	close(gate)
	p.wait()
	require.LessOrEqual(t, held, 2*resumePage+DefaultResumeConcurrency, "the pool held %d records at once (one page is %d)", held, resumePage)
	require.Equal(t, hosts-held, refused, "what it did not hold it refused as full")
}

// A full pool makes room for a host with no queue by taking the last record
// of the longest queue out (the scanner reads it again): hosts already
// queued, such as dead ones with a page each, cannot keep another host out
// of the pool, so fairness still bounds its wait. A host whose queue is no
// shorter than every other's is refused, and the pool says when it has room.
func TestFairPoolFullEvictsLongestQueue(t *testing.T) {
	gate := make(chan struct{})
	p := newFairPool(1, 4, func(string, *Record) { <-gate }) // holds 8 queued
	for i := range 4 {
		require.True(t, p.add("dead-a", seqRec(uint64(1+i))).ok)
		require.True(t, p.add("dead-b", seqRec(uint64(11+i))).ok)
	}
	res := p.add("healthy", seqRec(21))
	require.True(t, res.ok, "the pool is full, yet the healthy host gets in")
	require.Equal(t, "dead-a", res.evictedHost)
	require.Equal(t, uint64(4), seqOf(res.evicted), "the longest queue's last record")
	res = p.add("other", seqRec(22))
	require.True(t, res.ok)
	require.Equal(t, "dead-b", res.evictedHost)
	require.Equal(t, uint64(14), seqOf(res.evicted))
	require.True(t, p.add("dead-a", seqRec(4)).poolFull, "dead-a's queue is the longest: refused")
	require.True(t, p.add("third", seqRec(23)).ok, "dead-a's 3 are two more than none")
	require.Equal(t, 8, p.queued, "still full, never fuller")

	// It is drained down to half: the scanner is told to read on.
	p.pump()
	select {
	case <-p.room:
	default:
	}
	close(gate)
	p.wait()
	select {
	case <-p.room:
	default:
		t.Fatal("the pool emptied, and said nothing")
	}
	require.False(t, p.poolFull)
}

// A Resume pass over more one-operation hosts than the pool holds stops
// where the pool was full and reads on from there once it has room, without
// reading a record twice: every operation is sent once, and the pool never
// held more than two pages and the slots.
func TestResumeReadsOnPastFullPool(t *testing.T) {
	t.Parallel()
	const hosts = 3*resumePage + 10
	tr, clk := testTransport(t, &Options{ResumeConcurrency: 4})
	var wg sync.WaitGroup
	errs := make(chan error, hosts)
	for w := range 32 { // concurrent inserts share commits
		wg.Go(func() {
			for i := w; i < hosts; i += 32 {
				errs <- insertRec(tr.bolt(), &Record{Key: fmt.Sprintf("key-%d", i), Method: http.MethodPost,
					URL: fmt.Sprintf("https://h%d.example/payments", i), Body: []byte("{}"),
					Created: clk.Now(), Updated: clk.Now(), State: StatePending}, true)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

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
		return run.pool.poolFull
	}, "the pool fills")
	run.pool.mu.Lock()
	held := len(run.pool.known)
	run.pool.mu.Unlock()
	require.LessOrEqual(t, held, 2*resumePage+4)
	close(gate)
	require.NoError(t, <-done)
	require.Len(t, sent, hosts, "every operation sent")
	for id, n := range sent {
		require.Equal(t, 1, n, "record %d sent %d times", id, n)
	}
}
