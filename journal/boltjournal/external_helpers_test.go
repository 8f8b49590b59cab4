// Helpers for the external tests (package boltjournal_test), which drive an
// idem Transport or Client over a Journal through idem's public API only: a
// server that records what it gets, a journal and a Transport over it whose
// retries are due a millisecond after a call gives up, and bounded waits.

package boltjournal_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/internal/paytest"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// dueSoon is an Options.Backoff under which a given-up operation is due
// 1 ms later: tests resume it after waitDue, without a fake clock.
func dueSoon(int) time.Duration { return time.Millisecond }

// seenRequest is what the recording server got.
type seenRequest struct {
	Body   []byte
	Header http.Header
}

// recordingServer answers 503 while failing is set, 201 otherwise, with a
// Retry-After of retryAfter if it is set, and records every request.
type recordingServer struct {
	*httptest.Server
	failing    atomic.Bool
	retryAfter string // set before the first request

	mu   sync.Mutex
	seen []seenRequest
}

func newRecordingServer(tb testing.TB) *recordingServer {
	tb.Helper()
	s := &recordingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, seenRequest{Body: body, Header: r.Header.Clone()})
		s.mu.Unlock()
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		if s.failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	tb.Cleanup(s.Close)
	return s
}

func (s *recordingServer) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func (s *recordingServer) count() int { return len(s.requests()) }

// sealedFixture is a journal path and a recording server that fails until
// told otherwise.
type sealedFixture struct {
	path string
	srv  *recordingServer
}

func newSealedFixture(t *testing.T) *sealedFixture {
	f := &sealedFixture{path: filepath.Join(t.TempDir(), "sealed.journal"), srv: newRecordingServer(t)}
	f.srv.failing.Store(true)
	return f
}

// open opens the fixture's journal with kr (nil: no encryption) and a
// Transport over it. The journal closes with the test, or earlier by the
// caller.
func (f *sealedFixture) open(t *testing.T, kr *boltjournal.Keyring) (*boltjournal.Journal, *idem.Transport) {
	t.Helper()
	j, err := boltjournal.Open(f.path, &boltjournal.Options{Encryption: kr})
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	tr, err := idem.NewTransport(j, &idem.Options{MaxAttempts: 1, Backoff: dueSoon, Base: f.srv.Client().Transport})
	require.NoError(t, err)
	return j, tr
}

// leavePending sends one payment under operation ID op; the server is
// failing, so it stays pending. It returns the body sent.
func (f *sealedFixture) leavePending(t *testing.T, tr *idem.Transport, op string) string {
	t.Helper()
	body := paymentBody(op+"-4111111111111111", 700)
	req := newRequest(t, http.MethodPost, f.srv.URL+"/payments", body)
	req = req.WithContext(idem.WithOperationID(context.Background(), op))
	req.Header.Set("X-Trace", "trace-"+op)
	_, err := tr.RoundTrip(req)
	pendingErr(t, err)
	return body
}

// outcomesByOp waits until every pending operation in j is due, resumes
// them through tr and returns the outcomes by operation ID.
func outcomesByOp(t *testing.T, j *boltjournal.Journal, tr *idem.Transport) map[string]idem.Outcome {
	t.Helper()
	recs, err := j.Records()
	require.NoError(t, err)
	for _, r := range recs {
		waitDue(t, r.NextAttempt)
	}
	outs := map[string]idem.Outcome{}
	for _, o := range resumeAll(t, tr) {
		outs[o.Record.OperationID] = o
	}
	return outs
}

// resumeAll runs Resume with a bounded context and returns its outcomes,
// response bodies read and closed.
func resumeAll(tb testing.TB, tr *idem.Transport) []idem.Outcome {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var outs []idem.Outcome
	require.NoError(tb, tr.Resume(ctx, func(o idem.Outcome) {
		if o.Response != nil {
			io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
		}
		outs = append(outs, o)
	}))
	return outs
}

// waitDue waits (real time, a few milliseconds under dueSoon) until a next
// attempt at is due.
func waitDue(tb testing.TB, at time.Time) {
	tb.Helper()
	d := time.Until(at)
	require.Less(tb, d, time.Second, "next attempt unexpectedly far away")
	time.Sleep(d + time.Millisecond)
}

// keyIDs returns the encryption key ID of each record in j, by operation ID.
func keyIDs(t *testing.T, j *boltjournal.Journal) map[string]string {
	t.Helper()
	recs, err := j.Records()
	require.NoError(t, err)
	ids := map[string]string{}
	for _, r := range recs {
		ids[r.OperationID] = r.EncryptionKeyID
	}
	return ids
}

// pendingErr asserts err is a *idem.PendingError and returns it.
func pendingErr(tb testing.TB, err error) *idem.PendingError {
	tb.Helper()
	var perr *idem.PendingError
	require.ErrorAs(tb, err, &perr)
	return perr
}

// closedPort returns a loopback address nothing listens on.
func closedPort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := ln.Addr().String()
	require.NoError(tb, ln.Close())
	return addr
}

// The helpers this package's tests share with the root package's, from paytest.
var (
	startPayments = paytest.StartPayments
	paymentBody   = paytest.PaymentBody
	newRequest    = paytest.NewRequest
	drain         = paytest.Drain
	newKey32      = paytest.NewKey
)
