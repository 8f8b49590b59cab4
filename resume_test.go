// Tests for Resume (resume.go): it pages through many pending operations,
// never runs a call in flight in this process, refuses to send without the
// credentials it dropped, keeps the Host override, reads a record's host from
// its origin, builds each record once, is bounded by its context, and after a
// SIGKILL re-sends the same key and bytes (S19).

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/testserver"
)

// Resume reads pending operations a page at a time; every one is sent once,
// across page boundaries, even while sends settle (and so move) records.
func TestResumePagesThroughManyPending(t *testing.T) {
	t.Parallel()
	const n = 2*resumePage + 17
	j := fastJournal(t)
	for i := range n {
		rec := pendingRecord(fmt.Sprintf("key-%d", i))
		rec.Created = time.Now()
		require.NoError(t, insertRec(j, rec, true))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get(DefaultKeyHeader)]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	// The records point at 127.0.0.1:80; send them to the test server.
	base := &rewriteHost{host: srv.Listener.Addr().String(), next: srv.Client().Transport}
	tr, _ := transportOn(t, j, Options{}, base, time.Time{})
	settled := 0
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) {
		require.NoError(t, o.Err)
		o.Response.Body.Close()
		settled++
	}))
	require.Equal(t, n, settled)
	require.Len(t, seen, n)
	for k, c := range seen {
		require.Equal(t, 1, c, "key %s sent %d times", k, c)
	}
	left, err := pendingCount(j)
	require.NoError(t, err)
	require.Zero(t, left)
}

// rewriteHost sends every request to host instead of its URL's host.
type rewriteHost struct {
	host string
	next http.RoundTripper
}

func (rh *rewriteHost) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = rh.host, ""
	return rh.next.RoundTrip(r)
}

func TestResumeSkipsInFlightAnonymousCall(t *testing.T) {
	t.Parallel()
	// A POST with neither operation ID nor caller key: its lock and its
	// record once used two different minted keys, so Resume sent it again.
	g := newGate()
	tr, _, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			g.hold()
		}
		reply(w, http.StatusCreated)
	})
	t.Cleanup(g.open)

	done := roundTripAsync(tr, newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r1", 100)))
	await(t, g.arrived, "the call at the server")
	require.Equal(t, 1, srv.count())
	require.Equal(t, StatePending, onlyRecord(t, tr).State)

	require.Empty(t, resumeAll(t, tr), "Resume must skip a call in flight in this process")
	require.Equal(t, 1, srv.count())

	g.open()
	res := <-done
	require.NoError(t, res.err)
	drain(t, res.resp)
	require.Equal(t, http.StatusCreated, res.resp.StatusCode)
	require.Equal(t, StateSettled, onlyRecord(t, tr).State)
	require.Equal(t, 1, srv.count(), "one operation, one request")
}

func TestResumeSkipsCallerKeyCallOnOperationRecord(t *testing.T) {
	t.Parallel()
	// The record belongs to operation "op-r2"; a later call finds it by its
	// caller key alone. Resume locks by operation ID, so the call must too.
	const key = "caller-key-r2"
	g := newGate()
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			reply(w, http.StatusServiceUnavailable)
		case 2:
			g.hold()
			reply(w, http.StatusCreated)
		default:
			reply(w, http.StatusCreated)
		}
	})
	t.Cleanup(g.open)
	call := func(ctx context.Context) *http.Request {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
			strings.NewReader(paymentBody("order-r2", 200)))
		require.NoError(t, err)
		req.Header.Set(DefaultKeyHeader, key)
		return req
	}

	_, err := tr.RoundTrip(call(WithOperationID(context.Background(), "op-r2")))
	perr := pendingErr(t, err)
	pastNextAttempt(clk, perr.NextAttempt)

	done := roundTripAsync(tr, call(context.Background()))
	await(t, g.arrived, "the second call at the server")
	require.Equal(t, 2, srv.count())
	require.Empty(t, resumeAll(t, tr), "Resume must skip the operation while a call runs it")
	require.Equal(t, 2, srv.count())

	g.open()
	res := <-done
	require.NoError(t, res.err)
	drain(t, res.resp)
	require.Equal(t, http.StatusCreated, res.resp.StatusCode)
	rec := onlyRecord(t, tr)
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, "op-r2", rec.OperationID)
	require.Equal(t, key, sameKey(t, srv.requests()))
	require.Equal(t, 2, srv.count())
}

func TestResumeRefusesWithoutDroppedCredentials(t *testing.T) {
	t.Parallel()
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r13", 1300))
	req.Header.Set("Authorization", "Bearer tok-r13")
	_, err := tr.RoundTrip(req)
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt)

	outs := resumeAll(t, tr) // no PrepareResume
	require.Len(t, outs, 1)
	require.ErrorIs(t, outs[0].Err, ErrSensitiveHeaderMissing)
	require.Nil(t, outs[0].Response)
	require.Equal(t, 1, srv.count(), "Resume sent nothing without the credentials")
	require.Equal(t, StatePending, onlyRecord(t, tr).State)

	tr2, err := NewTransport(tr.bolt(), &Options{Base: srv.base(), PrepareResume: func(r *http.Request) error {
		r.Header.Set("Authorization", "Bearer tok-r13")
		return nil
	}})
	require.NoError(t, err)
	tr2.clock = clk
	outs = resumeAll(t, tr2)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	require.Equal(t, StateSettled, onlyRecord(t, tr2).State)
	seen := srv.requests()
	require.Len(t, seen, 2)
	require.Equal(t, "Bearer tok-r13", seen[1].Header.Get("Authorization"))
}

func TestHostOverrideJournaledAndResumed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var hosts []string
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		if n == 1 {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r17", 1700))
	req.Host = "payments.example"
	_, err := tr.RoundTrip(req)
	perr := pendingErr(t, err)
	require.Equal(t, "payments.example", onlyRecord(t, tr).Host)

	// A restart: the record is all the new process has.
	tr2, _ := transportOn(t, reopen(t, tr.bolt()), Options{}, srv.base(), perr.NextAttempt.Add(time.Millisecond))
	outs := resumeAll(t, tr2)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"payments.example", "payments.example"}, hosts)
}

// PrepareResume sees the Host a resumed request goes out with: the
// record's override, or else the target URL's own, as http.NewRequest sets
// it for a call (a hook may sign or route on it).
func TestPrepareResumeSeesHost(t *testing.T) {
	t.Parallel()
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	plain := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-h1", 100))
	override := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-h2", 200))
	override.Host = "payments.example"
	var next time.Time
	for _, req := range []*http.Request{plain, override} {
		_, err := tr.RoundTrip(req)
		if n := pendingErr(t, err).NextAttempt; n.After(next) {
			next = n // both due
		}
	}
	pastNextAttempt(clk, next)
	var mu sync.Mutex // Resume prepares several requests at once
	var seen []string
	tr2, err := NewTransport(tr.bolt(), &Options{Base: srv.base(), PrepareResume: func(r *http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Host)
		return nil
	}})
	require.NoError(t, err)
	tr2.clock = clk
	require.Len(t, resumeAll(t, tr2), 2)
	mu.Lock()
	defer mu.Unlock()
	require.ElementsMatch(t, []string{plain.URL.Host, "payments.example"}, seen,
		"the Host each resumed request carries to PrepareResume")
	require.Equal(t, plain.URL.Host, plain.Host)
}

func TestS19_SIGKILLBeforeResponseThenResume(t *testing.T) {
	t.Parallel()
	const ref = "order-s19"
	srv := startPayments(t, nil)
	// The server commits the payment, then sits on the response until the
	// worker is gone.
	srv.Script(testserver.Fault{Kind: testserver.FaultSlowResponse, Delay: time.Minute})
	path := filepath.Join(t.TempDir(), "s19.journal")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := helperCommand(ctx, "s19-worker", envJournal+"="+path, envURL+"="+srv.URL, envRef+"="+ref)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	for srv.Ledger().Effects[ref] == 0 {
		select {
		case err := <-exited:
			t.Fatalf("worker exited before the server committed the payment: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("the server never committed the worker's payment\n%s", out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err := <-exited
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, "output:\n%s", out.String())
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "worker ended by %v, not SIGKILL\n%s", ws, out.String())

	// The next run: the operation is pending in the journal, written before
	// the worker sent it.
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	rec := onlyRecordOf(t, j)
	require.Equal(t, StatePending, rec.State)
	require.Equal(t, "charge/"+ref, rec.OperationID)

	wire := newWireLog(t)
	tr, _ := transportOn(t, j, Options{}, wire, time.Time{})
	var outs []Outcome
	var replayed []byte
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) {
		if o.Response != nil {
			replayed = drain(t, o.Response)
		}
		outs = append(outs, o)
	}))
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	require.Equal(t, "true", outs[0].Response.Header.Get("Idempotent-Replayed"))
	require.Contains(t, string(replayed), ref)

	sent := wire.sent()
	require.Len(t, sent, 1)
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, paymentBody(ref, 4827), string(sent[0].Body))
	require.Equal(t, string(rec.Body), string(sent[0].Body))

	l := srv.Ledger()
	require.Equal(t, 1, l.Effects[ref], "one payment")
	require.GreaterOrEqual(t, l.Replays, 1)
	after, err := j.Lookup("charge/" + ref)
	require.NoError(t, err)
	require.Equal(t, StateSettled, after.State)
	require.Equal(t, http.StatusCreated, after.Status)
	require.Equal(t, rec.Key, after.Key)
}

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
		hosts := originHosts{}
		for range 2 { // parsed, then cached
			require.Equal(t, budgetHost(u), hosts.record(&Record{URL: target}), target)
			require.Equal(t, budgetHost(u), hosts.record(&Record{URL: "https://elsewhere.test/p", Location: target}), "moved to %s", target)
		}
	}
	hosts := originHosts{}
	for _, target := range []string{"", "/p", "api.test/p"} { // no origin: as recordHost reads it
		require.Equal(t, recordHost(&Record{URL: target}), hosts.record(&Record{URL: target}), target)
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

// downPending leaves n operations pending for a server that is down (nothing
// listens on its address), and moves the clock past their next attempts.
func downPending(t *testing.T, opts *Options, n int) (*Transport, *fakeClock) {
	t.Helper()
	opts.RetryBudget = RetryBudget{Disabled: true} // every operation tries: the worst case
	tr, clk := testTransport(t, opts)
	url := "http://" + freeAddr(t) + "/payments"
	for i := range n {
		ctx := WithMaxAttempts(WithOperationID(context.Background(), fmt.Sprintf("boot-%d", i)), 1)
		req := newRequest(t, http.MethodPost, url, paymentBody(fmt.Sprintf("boot-%d", i), 1))
		_, err := tr.RoundTrip(req.WithContext(ctx))
		pendingErr(t, err)
	}
	clk.Advance(time.Minute)
	return tr, clk
}

// A deadline on Resume's context bounds it: under the default backoff the
// six attempts of each operation would wait about 8 s; with 2 s left, each
// gives up once its next wait would pass the deadline, pending.
func TestResumeBoundedByDeadline(t *testing.T) {
	t.Parallel()
	// One at a time: the fake clock is shared, and waits of concurrent
	// sends would add up on it.
	tr, clk := downPending(t, &Options{ResumeConcurrency: 1}, 4)
	start, began := clk.Now(), time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(2*time.Second))
	defer cancel()
	var outs []Outcome
	require.NoError(t, tr.Resume(ctx, func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 4)
	for _, o := range outs {
		var pe *PendingError
		require.ErrorAs(t, o.Err, &pe, "%s", o.Record.OperationID)
		require.Less(t, pe.Attempts, DefaultMaxAttempts+1, "gave up before its schedule ran out")
	}
	require.Less(t, clk.Now().Sub(start), 2*time.Second, "no wait past the deadline")
	// Waited for real, the four schedules would take tens of seconds; 5 s
	// leaves a busy machine room.
	require.Less(t, time.Since(began), 5*time.Second, "no real waiting")
	require.Equal(t, 4, countState(t, tr.bolt(), StatePending))
}

// A Resume whose context is canceled while it waits to retry returns
// promptly: the operation it was sending stays pending, and those it had not
// started are not touched.
func TestResumeCanceledReturnsPromptly(t *testing.T) {
	t.Parallel()
	tr, clk := downPending(t, &Options{ResumeConcurrency: 1}, 3)
	before, err := listRecords(tr.journal)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	clk.onSleep = func(time.Duration) { cancel() } // the process is told to stop mid-wait
	var outs []Outcome
	require.NoError(t, tr.Resume(ctx, func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 1, "nothing started after the cancel")
	require.ErrorIs(t, outs[0].Err, context.Canceled)
	var pe *PendingError
	require.True(t, errors.As(outs[0].Err, &pe))
	after, err := listRecords(tr.journal)
	require.NoError(t, err)
	require.Len(t, after, 3)
	for i, r := range after {
		require.Equal(t, StatePending, r.State, r.OperationID)
		if r.OperationID != outs[0].Record.OperationID {
			require.Equal(t, before[i].Attempts, r.Attempts, "%s untouched", r.OperationID)
		}
	}
}

// helperS19Worker journals one payment and sends it; the parent kills it
// with SIGKILL before the (delayed) response arrives. Returning at all is a
// failure.
func helperS19Worker() int {
	c, err := Open(os.Getenv(envJournal), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	ref := os.Getenv(envRef)
	ctx := WithOperationID(context.Background(), "charge/"+ref)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, os.Getenv(envURL)+"/payments",
		strings.NewReader(paymentBody(ref, 4827)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	resp, err := c.HTTPClient().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	fmt.Fprintf(os.Stderr, "worker was not killed: response %v, error %v\n", resp != nil, err)
	return 4
}

// PrepareResume may read the body (to sign it) and add headers: it gets the
// journaled body, and what it adds goes out without entering the record.
func TestPrepareResumeReadsBodyRecordUnchanged(t *testing.T) {
	t.Parallel()
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	body := paymentBody("order-sig", 4242)
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", body))
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
	var signed []byte
	tr2, err := NewTransport(tr.bolt(), &Options{Base: srv.base(), MaxAttempts: 1, PrepareResume: func(r *http.Request) error {
		if r.Body != nil {
			signed, _ = io.ReadAll(r.Body)
		}
		r.Header.Set("X-Signature", "sig-of-body")
		return nil
	}})
	require.NoError(t, err)
	tr2.clock = clk
	outs := resumeAll(t, tr2)
	require.Len(t, outs, 1)
	require.Equal(t, body, string(signed), "PrepareResume reads the journaled body")
	seen := srv.requests()
	require.Len(t, seen, 2)
	require.Equal(t, "sig-of-body", seen[1].Header.Get("X-Signature"))
	rec := onlyRecord(t, tr2)
	require.Equal(t, StatePending, rec.State)
	require.Empty(t, rec.Header.Get("X-Signature"), "a header PrepareResume added is not journaled")
}
