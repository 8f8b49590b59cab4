// Helpers for tests that send through a Transport to a loopback server: an
// httptest server that records what each attempt carried, request builders,
// a tracker of response bodies, and a goroutine leak check.

package idem

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const payload = `{"amount": 4827, "currency": "eur", "reference": "order-4827"}`

// seenRequest is what the server received on one attempt.
type seenRequest struct {
	Method        string
	Body          []byte
	ContentLength int64
	Header        http.Header
	At            time.Time // on the Transport's clock
}

// recordingServer is an httptest server on 127.0.0.1 that answers with a
// scripted handler and records every request and every accepted connection.
type recordingServer struct {
	*httptest.Server
	clk   clock
	conns atomic.Int64

	mu   sync.Mutex
	seen []seenRequest
}

// newRecordingServer starts a server whose handler is reply(n, w, r), n being
// the 1-based number of the request. Arrivals are stamped with clk, which
// should be the Transport's clock. The test's cleanup closes the server.
func newRecordingServer(tb testing.TB, clk clock, reply func(n int, w http.ResponseWriter, r *http.Request)) *recordingServer {
	tb.Helper()
	if clk == nil {
		clk = realClock{}
	}
	s := &recordingServer{clk: clk}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, seenRequest{Method: r.Method, Body: body, ContentLength: r.ContentLength,
			Header: r.Header.Clone(), At: s.clk.Now()})
		n := len(s.seen)
		s.mu.Unlock()
		reply(n, w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	tb.Cleanup(s.Close)
	return s
}

// requests returns a copy of what the server has received so far.
func (s *recordingServer) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func (s *recordingServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// base is the RoundTripper attempts go through: the server's own client
// transport, whose idle connections Close shuts.
func (s *recordingServer) base() http.RoundTripper { return s.Client().Transport }

// newScenario builds a Transport with a fake clock over a fresh journal, and a
// recording server it sends its attempts to (unless opts.Base is set).
func newScenario(tb testing.TB, opts *Options, reply func(n int, w http.ResponseWriter, r *http.Request)) (*Transport, *fakeClock, *recordingServer) {
	tb.Helper()
	tr, clk := testTransport(tb, opts)
	srv := newRecordingServer(tb, clk, reply)
	if tr.cfg.Base == nil {
		tr.cfg.Base = srv.base()
	}
	return tr, clk, srv
}

// sameKey asserts every request carried one non-empty idempotency key and
// returns it.
func sameKey(tb testing.TB, reqs []seenRequest) string {
	tb.Helper()
	require.NotEmpty(tb, reqs)
	key := reqs[0].Header.Get(DefaultKeyHeader)
	require.NotEmpty(tb, key)
	for i, r := range reqs {
		require.Equal(tb, []string{key}, r.Header.Values(DefaultKeyHeader), "attempt %d", i+1)
	}
	return key
}

// bodyTracker wraps a RoundTripper and records, for every response body it
// hands out, whether it was read to the end and whether it was closed.
type bodyTracker struct {
	base http.RoundTripper

	mu     sync.Mutex
	bodies []*trackedBody
}

type trackedBody struct {
	io.ReadCloser
	status int
	eof    atomic.Bool
	closes atomic.Int32
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.closes.Add(1)
	return b.ReadCloser.Close()
}

func (bt *bodyTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := bt.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	tb := &trackedBody{ReadCloser: resp.Body, status: resp.StatusCode}
	resp.Body = tb
	bt.mu.Lock()
	bt.bodies = append(bt.bodies, tb)
	bt.mu.Unlock()
	return resp, nil
}

func (bt *bodyTracker) tracked() []*trackedBody {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return append([]*trackedBody(nil), bt.bodies...)
}

// reply writes status with header pairs ("Retry-After", "3") and a short body.
func reply(w http.ResponseWriter, status int, header ...string) {
	for i := 0; i+1 < len(header); i += 2 {
		w.Header().Set(header[i], header[i+1])
	}
	w.WriteHeader(status)
	io.WriteString(w, http.StatusText(status))
}

func created(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) }

// newRequest builds a request as http.NewRequest does: with ContentLength and
// GetBody set for a non-empty body.
func newRequest(tb testing.TB, method, url, body string) *http.Request {
	tb.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(tb, err)
	return req
}

// onlyRecord returns the journal's single record.
func onlyRecord(tb testing.TB, tr *Transport) *Record {
	tb.Helper()
	recs, err := tr.bolt().Records()
	require.NoError(tb, err)
	require.Len(tb, recs, 1)
	return recs[0]
}

// noRequests asserts that nothing was journaled and nothing reached srv.
func noRequests(tb testing.TB, tr *Transport, srv *recordingServer) {
	tb.Helper()
	recs, err := tr.bolt().Records()
	require.NoError(tb, err)
	require.Empty(tb, recs, "nothing journaled")
	require.Zero(tb, srv.count(), "nothing sent")
}

// sameBytes is require.Equal for bodies, printing them as text.
func sameBytes(tb testing.TB, want, got []byte, msgAndArgs ...any) {
	tb.Helper()
	if !bytes.Equal(want, got) {
		require.Equal(tb, string(want), string(got), msgAndArgs...)
	}
}
