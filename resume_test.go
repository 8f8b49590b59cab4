// Tests for Resume (resume.go): it pages through many pending operations,
// never runs a call in flight in this process, refuses to send without the
// credentials it dropped, keeps the Host override, and after a SIGKILL re-sends
// the same key and bytes (field scenario S19).

package idem

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
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
