// Scenarios S16-S19 from SCENARIOS.md (Keys): one idempotency key per
// operation, on every attempt and across restarts and crashes, against
// testserver.

package idem

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// status503 refuses one request before processing, without Retry-After.
var status503 = testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable}

func TestS16_CallerKeyKeptOnEveryAttempt(t *testing.T) {
	tests := []struct {
		name string
		set  func(r *http.Request, key string) *http.Request
	}{
		{"canonical header", func(r *http.Request, key string) *http.Request {
			r.Header.Set("Idempotency-Key", key)
			return r
		}},
		{"lower-case header map key", func(r *http.Request, key string) *http.Request {
			r.Header["idempotency-key"] = []string{key}
			return r
		}},
		{"upper-case header map key", func(r *http.Request, key string) *http.Request {
			r.Header["IDEMPOTENCY-KEY"] = []string{key}
			return r
		}},
		{"WithKey", func(r *http.Request, key string) *http.Request {
			return r.WithContext(WithKey(r.Context(), key))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startPayments(t, nil)
			srv.Script(status503, status503, status503)
			wire := newWireLog(t)
			j, _ := testJournal(t)
			tr, clk := transportOn(t, j, Options{MaxAttempts: 3}, wire, time.Time{})

			key := "caller key " + tt.name
			req, body := paymentRequest(t, context.Background(), srv.URL, "order-s16", 700)
			req = tt.set(req, key)
			header := req.Header.Clone()
			_, err := tr.RoundTrip(req)
			perr := pendingErr(t, err)
			require.Equal(t, key, perr.Key)
			require.Equal(t, 3, perr.Attempts)
			require.Equal(t, header, req.Header, "the caller's request is not modified")
			require.EqualValues(t, 1, body.closes.Load())

			// A restart: the resumed attempt carries the caller's key too.
			tr2, _ := transportOn(t, reopen(t, j), Options{}, wire, clk.Now().Add(time.Hour))
			outs := resumeAll(t, tr2)
			require.Len(t, outs, 1)
			require.NoError(t, outs[0].Err)
			require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
			require.Equal(t, key, outs[0].Record.Key)

			require.Len(t, wire.sent(), 4)
			wire.requireOneKey(t, key)
			require.Equal(t, 1, srv.Ledger().Effects["order-s16"])
		})
	}
}

func TestS17_OneKeyAcrossStatusesAndRestart(t *testing.T) {
	status429 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusTooManyRequests}
	status500 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusInternalServerError}
	status502 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusBadGateway}
	want := []byte(paymentBody("order-s17", 1250))

	requireSameBytes := func(t *testing.T, wire *wireLog, key string) {
		t.Helper()
		sent := wire.sent()
		require.Len(t, sent, 3)
		wire.requireOneKey(t, key)
		for i, a := range sent {
			require.Equal(t, string(want), string(a.Body), "attempt %d", i+1)
			require.EqualValues(t, len(want), a.ContentLength, "attempt %d", i+1)
		}
	}

	t.Run("one process", func(t *testing.T) {
		srv := startPayments(t, nil)
		srv.Script(status429, status500)
		wire := newWireLog(t)
		j, _ := testJournal(t)
		tr, clk := transportOn(t, j, Options{}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-s17", 1250)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Len(t, clk.Sleeps(), 2)

		rec := onlyRecordOf(t, j)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, 3, rec.Attempts)
		requireSameBytes(t, wire, rec.Key)
		require.Equal(t, 1, srv.Ledger().Effects["order-s17"])
	})

	t.Run("restart in the middle", func(t *testing.T) {
		srv := startPayments(t, nil)
		srv.Script(status429, status502)
		wire := newWireLog(t)
		j, _ := testJournal(t)
		tr, clk := transportOn(t, j, Options{MaxAttempts: 2}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-s17", 1250)
		_, err := tr.RoundTrip(req)
		perr := pendingErr(t, err)
		require.Equal(t, http.StatusBadGateway, perr.LastStatus)
		require.Equal(t, 0, srv.Ledger().Payments())

		// The process stops here; the next one opens the same file.
		tr2, _ := transportOn(t, reopen(t, j), Options{}, wire, clk.Now().Add(time.Minute))
		outs := resumeAll(t, tr2)
		require.Len(t, outs, 1)
		require.NoError(t, outs[0].Err)
		require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)

		rec := onlyRecordOf(t, tr2.bolt())
		require.Equal(t, perr.Key, rec.Key)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, 3, rec.Attempts, "attempts count across process lifetimes")
		requireSameBytes(t, wire, perr.Key)
		require.Equal(t, 1, srv.Ledger().Effects["order-s17"])
	})
}

func TestS18_HoldThen409ThenReplay(t *testing.T) {
	t.Parallel()
	srv := startPayments(t, nil)
	srv.Script(testserver.Fault{Kind: testserver.FaultHold, Delay: 1500 * time.Millisecond})
	wire := newWireLog(t)
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{AttemptTimeout: 300 * time.Millisecond, MaxAttempts: 40,
		InitialInterval: 100 * time.Millisecond}, wire, time.Time{})
	// Waits count in full on the fake clock (each 409's "Retry-After: 1" is a
	// second there) but take at most 100 ms of real time, so the hold, which is
	// real time on the server, ends after a dozen or so polls.
	clk.onSleep = func(d time.Duration) { time.Sleep(min(d, 100*time.Millisecond)) }

	ctx := WithOperationID(context.Background(), "charge/order-s18")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-s18", 1250)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	stored := drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), "the retry got the stored result")
	require.GreaterOrEqual(t, time.Since(start), 1200*time.Millisecond, "the result exists only once the hold ends")

	l := srv.Ledger()
	require.Equal(t, 1, l.Effects["order-s18"])
	require.GreaterOrEqual(t, l.InProgress, 1, "a retry met 409")
	require.GreaterOrEqual(t, l.Replays, 1)
	rec, err := j.Lookup("charge/order-s18")
	require.NoError(t, err)
	require.Equal(t, StateSettled, rec.State)
	require.GreaterOrEqual(t, rec.Attempts, 3)
	require.Equal(t, l.Requests, len(wire.sent()))
	wire.requireOneKey(t, rec.Key)
	require.Contains(t, string(stored), `"reference":"order-s18"`)

	// After a restart the app rebuilds the request with another amount under
	// the same operation ID: refused before anything is sent.
	j2 := reopen(t, j)
	tr2, _ := transportOn(t, j2, Options{}, wire, clk.Now())
	req2, body2 := paymentRequest(t, ctx, srv.URL, "order-s18", 9999)
	resp2, err := tr2.RoundTrip(req2)
	require.Nil(t, resp2)
	require.ErrorIs(t, err, ErrKeyReuse)
	require.EqualValues(t, 1, body2.closes.Load())
	require.Equal(t, l.Requests, srv.Ledger().Requests, "the server saw nothing new")
	require.Len(t, wire.sent(), l.Requests)
	after, err := j2.Lookup("charge/order-s18")
	require.NoError(t, err)
	require.Equal(t, rec.Key, after.Key)
	require.Equal(t, rec.BodySHA256, after.BodySHA256)
	require.Equal(t, StateSettled, after.State)
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
	j, err := OpenJournal(path, nil)
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
