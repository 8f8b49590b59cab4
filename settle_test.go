// Tests for how a call ends (settle.go): an operation that may have reached
// the server is never failed, one that cannot have is, a settled one is never
// downgraded or pending again, a response a Classifier calls permanent still
// settles, and one pending past KeyTTL expires with what reconciling needs.

package idem

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/memjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// certOnAttempts returns a wireLog that fails attempt n (counted from 1) with
// an untrusted-certificate error when fail(n), and sends the others.
func certOnAttempts(tb testing.TB, fail func(n int64) bool) *wireLog {
	wire := newWireLog(tb)
	var n atomic.Int64
	wire.intercept = func(*http.Request, string) (*http.Response, error) {
		if fail(n.Add(1)) {
			return nil, x509.UnknownAuthorityError{}
		}
		return nil, nil
	}
	return wire
}

func TestMaybeSentOperationNeverFailed(t *testing.T) {
	t.Parallel()
	// Attempt 1 creates the payment but its response is lost; attempt 2
	// fails on a certificate. The server has acted: pending, not failed.
	srv := startPayments(t, nil)
	srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
	wire := certOnAttempts(t, func(n int64) bool { return n == 2 })
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{}, wire, time.Time{})

	req, _ := paymentRequest(t, WithOperationID(context.Background(), "op-r3"), srv.URL, "order-r3", 300)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.NotErrorIs(t, err, ErrPermanent)
	perr := pendingErr(t, err)
	require.Equal(t, 2, perr.Attempts)
	rec, err := j.Lookup("op-r3")
	require.NoError(t, err)
	require.Equal(t, StatePending, rec.State)

	require.Empty(t, resumeAll(t, tr), "not before its next attempt")
	pastNextAttempt(clk, perr.NextAttempt)
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	require.Equal(t, "true", outs[0].Response.Header.Get("Idempotent-Replayed"))

	rec, err = j.Lookup("op-r3")
	require.NoError(t, err)
	require.Equal(t, StateSettled, rec.State)
	require.Len(t, wire.sent(), 3)
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, map[string]int{"order-r3": 1}, srv.Ledger().Effects)
}

func TestFreshOperationCertErrorFailsThenRecallCanPend(t *testing.T) {
	t.Parallel()
	// The contrast: a first attempt that fails on a certificate cannot have
	// reached the server, so the operation is failed. Re-called, it may
	// reach the server; left unknown then, it must be pending for Resume.
	srv := startPayments(t, nil)
	var certFail atomic.Bool
	certFail.Store(true)
	wire := certOnAttempts(t, func(int64) bool { return certFail.Load() })
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{MaxAttempts: 1}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "op-r6")

	req, _ := paymentRequest(t, ctx, srv.URL, "order-r6", 600)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrPermanent)
	require.False(t, errors.As(err, new(*PendingError)), "a failure before sending is not pending")
	rec, err := j.Lookup("op-r6")
	require.NoError(t, err)
	require.Equal(t, StateFailed, rec.State)
	require.NotEmpty(t, rec.LastError)
	require.Zero(t, srv.Ledger().Requests)

	certFail.Store(false)
	srv.Script(testserver.Fault{Kind: testserver.FaultDropBefore})
	req, _ = paymentRequest(t, ctx, srv.URL, "order-r6", 600)
	_, err = tr.RoundTrip(req)
	perr := pendingErr(t, err)
	rec, err = j.Lookup("op-r6")
	require.NoError(t, err)
	require.Equal(t, StatePending, rec.State, "re-sent with an unknown outcome: Resume must take it")

	pastNextAttempt(clk, perr.NextAttempt)
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	require.Equal(t, map[string]int{"order-r6": 1}, srv.Ledger().Effects)
}

func TestSettledOperationNeverDowngraded(t *testing.T) {
	srv := startPayments(t, nil)
	var certFail atomic.Bool
	wire := certOnAttempts(t, func(int64) bool { return certFail.Load() })
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "op-r4")
	call := func() (*http.Response, error) {
		req, _ := paymentRequest(t, ctx, srv.URL, "order-r4", 400)
		return tr.RoundTrip(req)
	}
	settledAs := func(status int) {
		t.Helper()
		rec, err := j.Lookup("op-r4")
		require.NoError(t, err)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, status, rec.Status)
	}

	resp, err := call()
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	settledAs(http.StatusCreated)

	// Within KeyTTL the call is re-sent; a certificate error then says
	// nothing about the stored outcome.
	certFail.Store(true)
	resp, err = call()
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrAlreadySettled)
	require.NotErrorIs(t, err, ErrPermanent)
	settledAs(http.StatusCreated)

	// Past KeyTTL nothing is sent, whatever the base would do.
	certFail.Store(false)
	clk.Advance(DefaultKeyTTL + time.Minute)
	sent := len(wire.sent())
	resp, err = call()
	require.Nil(t, resp)
	var settled *AlreadySettledError
	require.ErrorAs(t, err, &settled)
	require.Equal(t, http.StatusCreated, settled.Status)
	require.Len(t, wire.sent(), sent, "nothing sent past KeyTTL")
	settledAs(http.StatusCreated)
	require.Equal(t, map[string]int{"order-r4": 1}, srv.Ledger().Effects)
}

func TestPermanentClassOnResponseSettles(t *testing.T) {
	t.Parallel()
	// A Classifier may call a response ClassPermanent; the server answered, so
	// the answer is the outcome.
	classifier := func(a Attempt) Class {
		if a.Response != nil && a.Response.StatusCode == http.StatusBadRequest {
			return ClassPermanent
		}
		return DefaultClassifier(a)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			tr, _, srv := newScenario(t, &Options{Classifier: classifier}, func(_ int, w http.ResponseWriter, _ *http.Request) {
				reply(w, http.StatusBadRequest)
			})
			var resp *http.Response
			var err error
			require.NotPanics(t, func() {
				resp, err = tr.RoundTrip(newRequest(t, method, srv.URL+"/payments", paymentBody("order-r5", 500)))
			})
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			require.Equal(t, http.StatusText(http.StatusBadRequest), string(drain(t, resp)))
			require.Equal(t, 1, srv.count())
			if method == http.MethodPost {
				rec := onlyRecord(t, tr)
				require.Equal(t, StateSettled, rec.State)
				require.Equal(t, http.StatusBadRequest, rec.Status)
			}
		})
	}
}

func TestKeyExpiryReportsWhatReconcilingNeeds(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	// The first attempt pays but its answer is lost; a resume half an hour
	// later meets 503. The outcome is unknown all along.
	srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse}, status503)
	j, _ := testJournal(t)
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tr, clk := transportOn(t, j, Options{KeyTTL: time.Hour, MaxAttempts: 1}, wire, t0)

	ctx := WithOperationID(context.Background(), "order-21/charge")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-21", 2100)
	req.Header.Set("X-Request-Source", "checkout")
	_, err := tr.RoundTrip(req)
	perr := pendingErr(t, err)

	clk.Advance(30 * time.Minute)
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	pendingErr(t, outs[0].Err)
	lastAttempt := clk.Now()

	// Another operation, without an operation ID, written ahead later: still
	// within KeyTTL when the first one expires.
	srv.Script(status503)
	_, err = tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-22", 2200)))
	other := pendingErr(t, err)

	clk.Advance(31 * time.Minute) // the first is 61 minutes old, the second 31
	sent := len(wire.sent())
	outs = resumeAll(t, tr)
	require.Len(t, outs, 2)
	byKey := map[string]Outcome{}
	for _, o := range outs {
		byKey[o.Record.Key] = o
	}
	require.NoError(t, byKey[other.Key].Err, "the younger one is sent and settles")
	require.Len(t, wire.sent(), sent+1, "only the younger one was sent")
	for _, a := range wire.sent()[sent:] {
		require.Equal(t, []string{other.Key}, a.Keys)
	}

	exp := byKey[perr.Key]
	require.Nil(t, exp.Response)
	require.ErrorIs(t, exp.Err, ErrKeyExpired)
	require.Contains(t, exp.Err.Error(), "order-21/charge")
	require.Contains(t, exp.Err.Error(), perr.Key)
	rec := exp.Record
	require.Equal(t, StateExpired, rec.State)
	require.Equal(t, "order-21/charge", rec.OperationID)
	require.Equal(t, perr.Key, rec.Key)
	require.Equal(t, http.MethodPost, rec.Method)
	require.Equal(t, srv.URL+"/payments", rec.URL)
	require.Equal(t, "checkout", rec.Header.Get("X-Request-Source"))
	require.Equal(t, "application/json", rec.Header.Get("Content-Type"))
	sameBytes(t, []byte(paymentBody("order-21", 2100)), rec.Body, "the body, to find the business reference")
	sum := bodySum(rec.Body)
	require.Equal(t, sum, rec.BodySHA256)
	require.True(t, rec.Created.Equal(t0), "Created is the first attempt's time: %v", rec.Created)
	require.True(t, rec.LastAttempt.Equal(lastAttempt), "LastAttempt: %v, want %v", rec.LastAttempt, lastAttempt)
	require.Equal(t, 2, rec.Attempts)
	require.Equal(t, http.StatusServiceUnavailable, rec.Status)

	// The record stays, body and all, across a restart; it is never sent or
	// reported again, and a call under its operation ID is refused.
	j2 := reopen(t, j)
	kept, err := j2.Lookup("order-21/charge")
	require.NoError(t, err)
	require.Equal(t, StateExpired, kept.State)
	sameBytes(t, rec.Body, kept.Body)
	require.True(t, kept.Created.Equal(t0) && kept.LastAttempt.Equal(lastAttempt))
	tr2, clk2 := transportOn(t, j2, Options{KeyTTL: time.Hour, MaxAttempts: 1}, wire, clk.Now())
	clk2.Advance(24 * time.Hour)
	require.Empty(t, resumeAll(t, tr2))
	req, body := paymentRequest(t, ctx, srv.URL, "order-21", 2100)
	resp, err := tr2.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrKeyExpired)
	require.EqualValues(t, 1, body.closes.Load())
	require.Len(t, wire.sent(), sent+1, "nothing more sent")

	// Reconciling: the server did pay order-21, once.
	lookup, err := srv.Client().Get(srv.URL + "/payments?reference=order-21")
	require.NoError(t, err)
	var found struct{ Data []struct{ Reference string } }
	require.NoError(t, json.Unmarshal(drain(t, lookup), &found))
	require.Len(t, found.Data, 1)
	require.NoError(t, srv.Ledger().Check([]string{"order-21", "order-22"}))
}

// An operation the server asked to wait for longer than KeyTTL (Retry-After)
// is reported expired as soon as its key is past KeyTTL, not when the wait
// ends, and is never sent.
func TestKeyExpiryBeforeNextAttempt(t *testing.T) {
	t.Parallel()
	srv, wire := startPayments(t, nil), newWireLog(t)
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable, RetryAfter: "7200"})
	j := memStore(t)
	tr, clk := transportOver(t, j, Options{KeyTTL: time.Hour}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-23/charge")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-23", 2300)
	_, err := tr.RoundTrip(req)
	perr := pendingErr(t, err)
	require.Equal(t, 2*time.Hour, perr.NextAttempt.Sub(clk.Now()))

	clk.Advance(time.Hour + time.Minute) // past KeyTTL, before the server's time
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.ErrorIs(t, outs[0].Err, ErrKeyExpired)
	require.Equal(t, "order-23/charge", outs[0].Record.OperationID)

	clk.Advance(2 * time.Hour)
	require.Empty(t, resumeAll(t, tr))
	require.Len(t, wire.sent(), 1, "only the first attempt was ever sent")
}

type certFailure struct{}

func (certFailure) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, x509.UnknownAuthorityError{}
}

func payWithOp(t *testing.T, c *http.Client, url, op, ref string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(WithOperationID(context.Background(), op), http.MethodPost,
		url+"/payments", strings.NewReader(paymentBody(ref, 10)))
	require.NoError(t, err)
	return c.Do(req)
}

// A failed operation called again that fails the same way, before anything
// was written, is failed again: not pending, so Resume leaves it alone.
func TestFailedOperationFailingAgainStaysFailed(t *testing.T) {
	tr, _ := testTransport(t, &Options{Base: certFailure{}, MaxAttempts: 1})
	c := &http.Client{Transport: tr}
	for range 2 {
		_, err := payWithOp(t, c, "http://127.0.0.1:1", "op-f", "r")
		require.ErrorIs(t, err, ErrPermanent)
		rec, err := tr.bolt().Lookup("op-f")
		require.NoError(t, err)
		require.Equal(t, StateFailed, rec.State)
	}
	resumed := 0
	require.NoError(t, tr.Resume(context.Background(), func(Outcome) { resumed++ }))
	require.Zero(t, resumed)
}

// certThenHold fails its first attempt with a certificate error, holds the second
// until released, and sends the rest.
type certThenHold struct {
	n                 atomic.Int32
	entered, released chan struct{}
	next              http.RoundTripper
}

func (g *certThenHold) RoundTrip(r *http.Request) (*http.Response, error) {
	switch g.n.Add(1) {
	case 1:
		return nil, x509.UnknownAuthorityError{}
	case 2:
		close(g.entered)
		<-g.released
	}
	return g.next.RoundTrip(r)
}

// Prune runs, with the failed operation past Retention, while a call sends it
// again. The call made it pending first, so Prune leaves it alone: it keeps
// its body and its operation ID.
func TestPruneWhileFailedOperationIsSentAgain(t *testing.T) {
	srv := startPayments(t, &testserver.Options{RequireKey: true})
	g := &certThenHold{entered: make(chan struct{}), released: make(chan struct{}), next: srv.Client().Transport}
	var clk *fakeClock
	j := memjournal.New(&memjournal.Options{Now: func() time.Time { return clk.Now() }}) // prunes by the test's clock
	t.Cleanup(func() { j.Close() })
	tr, clk := transportWith(t, j, &Options{Base: g, MaxAttempts: 1})
	c := &http.Client{Transport: tr}

	_, err := payWithOp(t, c, srv.URL, "order-1", "ref-1")
	require.ErrorIs(t, err, ErrPermanent)
	done := make(chan error, 1)
	go func() {
		resp, err := payWithOp(t, c, srv.URL, "order-1", "ref-1")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-g.entered
	clk.Advance(8 * 24 * time.Hour)
	n, err := j.Prune(boltjournal.DefaultRetention)
	require.NoError(t, err)
	require.Zero(t, n, "an operation being sent again is pending, never pruned")
	close(g.released)
	require.NoError(t, <-done)

	rec, err := j.Get(context.Background(), journal.Name{OperationID: "order-1"})
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Equal(t, StateSettled, rec.State)
	// Eight days on, past KeyTTL, the operation ID still names it: refused,
	// not sent under a new key.
	requests := srv.Ledger().Requests
	_, err = payWithOp(t, c, srv.URL, "order-1", "ref-1")
	require.ErrorIs(t, err, ErrAlreadySettled)
	require.Equal(t, requests, srv.Ledger().Requests)
	require.Equal(t, map[string]int{"ref-1": 1}, srv.Ledger().Effects)
}

// Callers racing on each operation ID, half the answers 503: once one got a
// final response, the operation is never pending again.
func TestSettledOperationNeverPendingAgain(t *testing.T) {
	t.Parallel()
	plan, err := testserver.ParsePlan(1, "503=0.5")
	require.NoError(t, err)
	srv := startPayments(t, &testserver.Options{Plan: plan})
	j := fastJournal(t)
	tr, _ := transportOn(t, j, Options{MaxAttempts: 1}, &http.Transport{MaxIdleConnsPerHost: 16}, time.Time{})
	tr.clock = realClock{}
	c := &http.Client{Transport: tr}
	var mu sync.Mutex
	settled := map[string]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for n := range 300 {
		op := fmt.Sprintf("op-%d", n)
		for range 3 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				resp, err := payWithOp(t, c, srv.URL, op, op)
				if err != nil {
					return
				}
				if resp.StatusCode == http.StatusCreated {
					mu.Lock()
					settled[op] = true
					mu.Unlock()
				}
				resp.Body.Close()
			})
		}
	}
	wg.Wait()
	recs, err := j.Records()
	require.NoError(t, err)
	require.NotEmpty(t, settled)
	for _, r := range recs {
		if settled[r.OperationID] {
			require.NotEqual(t, StatePending, r.State, "%s got a 201 but is pending again", r.OperationID)
		}
	}
}

// A record sealed under a key the boltjournal.Keyring no longer has is reported (not
// sent) by every resumer pass within KeyTTL; once past KeyTTL it expires,
// reported once with ErrKeyExpired joined to the unknown-key reason, and
// later passes say nothing of it. Its sealed part is left intact: with the
// key back it still opens.
func TestSealedRecordWithoutItsKeyExpires(t *testing.T) {
	leakcheck.Check(t)
	f := newSealedFixture(t)
	ka, kb := newKey32(t), newKey32(t)
	onlyA := &boltjournal.Keyring{Current: "A", Keys: map[string][]byte{"A": ka}}
	onlyB := &boltjournal.Keyring{Current: "B", Keys: map[string][]byte{"B": kb}}
	j, tr := f.open(t, onlyA)
	body := f.leavePending(t, tr, "gone-1")
	created := onlyRecordOf(t, j).Created
	require.NoError(t, j.Close())

	// Key A removed while gone-1 still needs it.
	opts := Options{MaxAttempts: 1, Journal: boltjournal.Options{Encryption: onlyB}, KeyTTL: time.Hour, ResumeInterval: time.Minute}
	j, err := boltjournal.Open(f.path, &opts.Journal)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	tr, clk := transportOn(t, j, opts, f.srv.base(), created)
	clk.Advance(10 * time.Minute) // past its next attempt, within KeyTTL
	c := &Client{journal: j, transport: tr}
	var got outcomes
	stop := c.StartResumer(context.Background(), got.add)
	defer stop()

	eventually(t, 2*time.Second, func() bool { return len(got.all()) == 1 && clk.Timers() == 1 }, "first pass")
	require.ErrorIs(t, got.all()[0].Err, journal.ErrUnknownEncryptionKey)
	require.NotErrorIs(t, got.all()[0].Err, ErrKeyExpired, "within KeyTTL it waits for its key")
	require.Equal(t, StatePending, onlyRecordOf(t, j).State)

	clk.Advance(time.Minute) // the next poll, still within KeyTTL
	eventually(t, 2*time.Second, func() bool { return len(got.all()) == 2 && clk.Timers() == 1 }, "second pass")
	require.NotErrorIs(t, got.all()[1].Err, ErrKeyExpired)

	clk.Advance(time.Hour) // past KeyTTL
	eventually(t, 2*time.Second, func() bool { return len(got.all()) == 3 && clk.Timers() == 1 }, "pass past KeyTTL")
	out := got.all()[2]
	require.ErrorIs(t, out.Err, ErrKeyExpired)
	require.ErrorIs(t, out.Err, journal.ErrUnknownEncryptionKey, "the reason it could not be sent stays visible")
	require.Equal(t, "gone-1", out.Record.OperationID)
	require.Equal(t, StateExpired, out.Record.State)
	rec := onlyRecordOf(t, j)
	require.Equal(t, StateExpired, rec.State)
	require.True(t, rec.Sealed)

	// Later passes report nothing more.
	for range 3 {
		clk.Advance(time.Minute)
		eventually(t, 2*time.Second, func() bool { return clk.Timers() == 1 }, "a later pass")
	}
	time.Sleep(10 * time.Millisecond)
	require.Len(t, got.all(), 3, "an expired operation is not reported again")
	require.Empty(t, f.srv.requests()[1:], "nothing sent after the first attempt")
	stop()
	require.NoError(t, j.Close())

	// The sealed part was written back untouched: with A back it opens.
	j, err = boltjournal.Open(f.path, &boltjournal.Options{Encryption: &boltjournal.Keyring{Current: "B", Keys: map[string][]byte{"A": ka, "B": kb}}})
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	rec, err = j.Lookup("gone-1")
	require.NoError(t, err)
	require.Equal(t, StateExpired, rec.State)
	require.Equal(t, body, string(rec.Body), "expired keeps its body, for reconciling")
	require.Equal(t, "trace-gone-1", rec.Header.Get("X-Trace"))
}

// BenchmarkSettle measures a deferred state change, which never waits for a commit.
func BenchmarkSettle(b *testing.B) {
	j, _ := testJournal(b)
	rec := &Record{Key: "k", Method: http.MethodPost, URL: "http://127.0.0.1/payments", State: StatePending}
	if err := insertRec(j, rec, true); err != nil {
		b.Fatal(err)
	}
	rec.State = StateSettled
	b.ReportAllocs()
	for b.Loop() {
		if err := saveRec(j, rec); err != nil {
			b.Fatal(err)
		}
	}
}
