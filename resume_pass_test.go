// Tests for resume_pass.go, a resume run's scans and sends: each pending
// record is read again just before it is sent, so what is no longer due is
// not; a scan that left a full host out waits for room; and thousands of
// pending operations resumed while new calls flow, with no deadlock and each
// settled once (IDEM_RESUME_SCALE sets how many: default 2,000, 500 with
// -short; docs/reliability.md runs 10,000).

package idem

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

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

// An operation a call gave up on until later, after Resume listed it, is not
// sent by that pass: the re-read is checked for being due, not the listing.
func TestResumeSkipsOperationNoLongerDue(t *testing.T) {
	srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusCreated)
	})
	tr, clk := memTransport(t, &Options{Base: srv.base()})
	rec := pendingRecord("a")
	rec.URL, rec.Body, rec.Created = srv.URL+"/payments", []byte(`{"amount":700}`), clk.Now()
	rec.BodySHA256 = bodySum(rec.Body) // as a write-ahead has it
	require.NoError(t, insertRec(tr.journal, rec, true))
	page, err := pendingAfter(tr.journal, 0, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)

	rec.Attempts, rec.NextAttempt = 1, clk.Now().Add(time.Minute)
	require.NoError(t, saveRec(tr.journal, rec))
	lim, err := tr.cfg.callLimits(context.Background())
	require.NoError(t, err)
	resp, err := tr.resume(context.Background(), page[0], lim, false)
	require.ErrorIs(t, err, errNotDue)
	require.Nil(t, resp)
	require.Zero(t, srv.count(), "nothing sent before NextAttempt")
}

// inFlight is middleware that counts requests in progress, the resumed
// ones (their keys start with resumedPrefix) apart, and keeps the maxima.
type inFlight struct {
	next                  http.Handler
	all, resumed          atomic.Int64
	maxAll, maxResumed    atomic.Int64
	resumedReqs, callReqs atomic.Int64
}

const resumedPrefix = "scale-"

func (f *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resumed := strings.HasPrefix(r.Header.Get(DefaultKeyHeader), resumedPrefix)
	raise(&f.maxAll, f.all.Add(1))
	defer f.all.Add(-1)
	if resumed {
		f.resumedReqs.Add(1)
		raise(&f.maxResumed, f.resumed.Add(1))
		defer f.resumed.Add(-1)
	} else {
		f.callReqs.Add(1)
	}
	f.next.ServeHTTP(w, r)
}

// raise sets *m to v if v is larger.
func raise(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

func resumeScale(tb testing.TB) int {
	if s := os.Getenv("IDEM_RESUME_SCALE"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(tb, err, "IDEM_RESUME_SCALE")
		return n
	}
	if testing.Short() {
		return 500
	}
	return 2000
}

func TestResumeAtScaleWhileCallsFlow(t *testing.T) {
	t.Parallel()
	const (
		resumeConcurrency = 16
		callers           = 4
	)
	n := resumeScale(t)
	pay := testserver.NewServer(&testserver.Options{RequireKey: true})
	t.Cleanup(pay.Close)
	counter := &inFlight{next: pay.Handler()}
	front := httptest.NewServer(counter) // the same API, counted
	t.Cleanup(front.Close)

	// The pending operations a crashed run would leave: written ahead,
	// never answered.
	j := fastJournal(t) // a bbolt journal, without the disk's fsync
	fill := time.Now()
	refs := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 { // concurrent inserts share commits
		wg.Go(func() {
			for i := w; i < n; i += 64 {
				refs[i] = fmt.Sprintf("resumed-%05d", i)
				body := []byte(paymentBody(refs[i], 100+i))
				sum := bodySum(body)
				rec := &Record{Key: fmt.Sprintf("%s%05d", resumedPrefix, i), OperationID: refs[i] + "/charge",
					Method: http.MethodPost, URL: front.URL + "/payments",
					Header: http.Header{"Content-Type": {"application/json"}}, Body: body, BodySHA256: sum,
					Created: time.Now(), Updated: time.Now(), State: StatePending}
				if err := insertRec(j, rec, true); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	pending, err := pendingCount(j)
	require.NoError(t, err)
	require.Equal(t, n, pending)
	t.Logf("%d pending operations written in %v", n, time.Since(fill).Round(time.Millisecond))

	tr, err := NewTransport(j, &Options{ResumeConcurrency: resumeConcurrency, Base: front.Client().Transport})
	require.NoError(t, err)

	// New calls through the same Transport, all the while.
	stop := make(chan struct{})
	var calls sync.WaitGroup
	var callRefs sync.Map
	var callErrs atomic.Int64
	for c := range callers {
		calls.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				ref := fmt.Sprintf("call-%d-%d", c, k)
				callRefs.Store(ref, true)
				ctx := WithOperationID(context.Background(), ref+"/charge")
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+"/payments",
					strings.NewReader(paymentBody(ref, 1)))
				if err != nil {
					callErrs.Add(1)
					return
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					callErrs.Add(1)
					continue
				}
				if resp.StatusCode != http.StatusCreated {
					callErrs.Add(1)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}

	start := time.Now()
	var settled, failed int
	done := make(chan error, 1)
	go func() {
		done <- tr.Resume(context.Background(), func(o Outcome) {
			if o.Err != nil || o.Response.StatusCode != http.StatusCreated {
				failed++
			} else {
				settled++
			}
			if o.Response != nil {
				io.Copy(io.Discard, o.Response.Body)
				o.Response.Body.Close()
			}
		})
	}()
	limit := 5 * time.Minute
	select {
	case err = <-done:
	case <-time.After(limit):
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatalf("Resume did not return within %v: deadlock? (goroutines above)", limit)
	}
	elapsed := time.Since(start)
	close(stop)
	calls.Wait()
	require.NoError(t, err)

	newCalls := 0
	var all []string
	all = append(all, refs...)
	callRefs.Range(func(k, _ any) bool { newCalls++; all = append(all, k.(string)); return true })
	require.Zero(t, failed, "resumes that did not settle with 201")
	require.Zero(t, callErrs.Load(), "new calls that failed")
	require.Equal(t, n, settled)
	pending, err = pendingCount(j)
	require.NoError(t, err)
	require.Zero(t, pending, "left pending")
	ledger := pay.Ledger()
	require.NoError(t, ledger.Check(all))
	require.Equal(t, n+newCalls, ledger.Payments())
	require.EqualValues(t, n, counter.resumedReqs.Load(), "each pending operation sent once")
	require.LessOrEqual(t, counter.maxResumed.Load(), int64(resumeConcurrency), "resumed requests in flight")
	require.LessOrEqual(t, counter.maxAll.Load(), int64(resumeConcurrency+callers), "requests in flight")
	require.Positive(t, newCalls, "calls went through while Resume ran")

	stats := j.Stats()
	t.Logf("Resume of %d pending operations with %d new calls flowing (%d callers): %v, %.0f resumed operations/s; "+
		"max in flight at the server %d resumed (ResumeConcurrency %d), %d in all; %d journal commits",
		n, newCalls, callers, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(),
		counter.maxResumed.Load(), resumeConcurrency, counter.maxAll.Load(), stats.Commits)
}
