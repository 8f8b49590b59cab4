// Helpers for client_test.go, in package idem_test so they use only idem's
// public API: a testserver behind a front that records the headers of every
// request, a Client in a temporary directory, and bounded waits.

package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// seenRequest is what the payments server got: the request line and the
// headers idem sets on every attempt.
type seenRequest struct {
	Method, Path string
	Key          string // the Idempotency-Key header; "" if absent
	HasKey       bool
	Attempt      string // the idem.AttemptHeader
}

// payments is a testserver.Server behind a front that records every request
// it is handed, faults included, so a test can check the headers the server
// saw. Faults, keys and the ledger are the testserver's own.
type payments struct {
	srv *testserver.Server
	url string // the front's base URL; send here, not to srv.URL

	mu      sync.Mutex
	seen    []seenRequest
	arrived chan seenRequest // every request, as it arrives (dropped when full)
}

func newPayments(t *testing.T) *payments {
	t.Helper()
	p := &payments{srv: testserver.NewServer(&testserver.Options{RequireKey: true}),
		arrived: make(chan seenRequest, 64)}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := r.Header[idem.DefaultKeyHeader]
		s := seenRequest{Method: r.Method, Path: r.URL.Path, HasKey: ok,
			Attempt: r.Header.Get(idem.AttemptHeader)}
		if ok {
			s.Key = strings.Join(key, ",")
		}
		p.mu.Lock()
		p.seen = append(p.seen, s)
		p.mu.Unlock()
		select {
		case p.arrived <- s:
		default:
		}
		p.srv.Handler().ServeHTTP(w, r) // w unwrapped: faults hijack it
	}))
	p.url = front.URL
	// Cleanups run last-in first-out: the testserver's Close wakes held
	// requests first, so the front's Close does not wait for them.
	t.Cleanup(front.Close)
	t.Cleanup(p.srv.Close)
	return p
}

// requests returns what the server got so far, in arrival order.
func (p *payments) requests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

// waitArrival waits for the next request to reach the server.
func (p *payments) waitArrival(t *testing.T) seenRequest {
	t.Helper()
	select {
	case s := <-p.arrived:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the server within 10s")
		return seenRequest{}
	}
}

// payment builds a POST /payments request for ref.
func (p *payments) payment(t *testing.T, ctx context.Context, ref string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/payments",
		strings.NewReader(paymentBody(ref)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// paymentBody is the JSON body of payment's request for ref.
func paymentBody(ref string) string {
	return fmt.Sprintf(`{"amount":1250,"currency":"eur","reference":%q}`, ref)
}

// fastOptions gives millisecond backoff, and a base transport without
// keep-alives, so that net/http never re-sends a request on its own on a
// reused connection and every attempt the server sees is one idem made.
func fastOptions(t *testing.T) *idem.Options {
	base := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(base.CloseIdleConnections)
	return &idem.Options{Base: base, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond}
}

// openClient opens a Client on path, closed at the end of the test.
func openClient(t *testing.T, path string, opts *idem.Options) *idem.Client {
	t.Helper()
	c, err := idem.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newJournalPath returns a journal path in a fresh temporary directory.
func newJournalPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "payments.journal")
}

// lookup returns the record of operation id, failing the test if it has none.
func lookup(t *testing.T, c *idem.Client, id string) *idem.Record {
	t.Helper()
	rec, err := c.Journal().Lookup(id)
	require.NoError(t, err)
	require.NotNil(t, rec, "no record for operation %q", id)
	return rec
}

// waitDue waits (real time, a few milliseconds with fastOptions) until a
// pending operation's next attempt is due, so Resume sends it.
func waitDue(t *testing.T, at time.Time) {
	t.Helper()
	d := time.Until(at)
	require.Less(t, d, time.Second, "next attempt unexpectedly far away")
	time.Sleep(d)
}

// eventually polls cond every few milliseconds for up to 10 s (real time).
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("not within 10s: " + msg)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// resumeAll runs Resume with a bounded context and returns its outcomes,
// response bodies read and closed.
func resumeAll(t *testing.T, c *idem.Client) []idem.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var outs []idem.Outcome
	err := c.Resume(ctx, func(o idem.Outcome) {
		if o.Response != nil {
			_, _ = io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
		}
		outs = append(outs, o)
	})
	require.NoError(t, err)
	return outs
}
