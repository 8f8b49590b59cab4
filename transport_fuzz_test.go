// FuzzTransportResponse runs one journaled POST through a Transport against a raw TCP
// server that answers each attempt with fuzz-chosen bytes (status line, headers, body,
// or garbage) and closes. It checks the RoundTripper contract and the invariants of
// DESIGN "Invariants every test suite here protects" for whatever comes back.

package idem

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
)

// rawServer accepts connections on 127.0.0.1:0; for each it reads one request (all of
// its body when readBody), writes the next scripted answer verbatim and closes, with an
// RST instead of a FIN when reset. The first request gets first, later ones rest.
type rawServer struct {
	ln          net.Listener
	first, rest []byte
	readBody    bool
	reset       bool
	wg          sync.WaitGroup

	mu   sync.Mutex
	seen []wireAttempt // Body is nil when the body was not read
}

func startRawServer(tb testing.TB, first, rest []byte, readBody, reset bool) *rawServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &rawServer{ln: ln, first: first, rest: rest, readBody: readBody, reset: reset}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	return s
}

func (s *rawServer) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return // the client gave up before a whole request: nothing to answer
	}
	a := wireAttempt{Keys: headerValues(req.Header, DefaultKeyHeader), ContentLength: req.ContentLength}
	if s.readBody {
		if a.Body, err = io.ReadAll(req.Body); err != nil {
			return
		}
	}
	s.mu.Lock()
	s.seen = append(s.seen, a)
	answer := s.rest
	if len(s.seen) == 1 {
		answer = s.first
	}
	s.mu.Unlock()
	c.Write(answer)
	if tc, ok := c.(*net.TCPConn); ok && s.reset {
		tc.SetLinger(0)
	}
}

// close stops accepting and waits for every connection to be closed.
func (s *rawServer) close() {
	s.ln.Close()
	s.wg.Wait()
}

func (s *rawServer) attempts() []wireAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wireAttempt(nil), s.seen...)
}

// fuzzMaxAttempts keeps each input to a few milliseconds.
const fuzzMaxAttempts = 3

func FuzzTransportResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n"),
		[]byte("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"), uint8(1))
	f.Fuzz(func(t *testing.T, first, rest []byte, mode uint8) {
		before := runtime.NumGoroutine()
		srv := startRawServer(t, first, rest, mode&1 != 0, mode&2 != 0)
		base := &http.Transport{}
		j := memStore(t)
		tr, clk := transportOver(t, j, Options{MaxAttempts: fuzzMaxAttempts, AttemptTimeout: time.Second}, base, time.Time{})
		start := clk.Now()
		ctx := context.Background()
		if mode&4 != 0 {
			ctx = WithOperationID(ctx, "order-4827/charge")
		}
		var deadline time.Time
		if mode&8 != 0 { // a deadline the fake clock can pass: Retry-After beyond it gives up
			var cancel context.CancelFunc
			deadline = start.Add(20 * time.Second)
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		body := []byte(paymentBody("order-4827", 1250))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.ln.Addr().String()+"/payments", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}

		resp, err := tr.RoundTrip(req)
		if (resp == nil) == (err == nil) {
			t.Fatalf("RoundTrip returned response %v and error %v", resp != nil, err)
		}
		if resp != nil {
			io.CopyN(io.Discard, resp.Body, 1<<16)
			resp.Body.Close()
			if DefaultClassifier(Attempt{Response: resp, Keyed: true}) != ClassFinal {
				t.Fatalf("status %d returned to the caller, yet the classifier says retry", resp.StatusCode)
			}
		}
		base.CloseIdleConnections()
		srv.close()

		// Nothing lost: the one operation is settled with the status returned, or
		// pending (or failed, if no request ever reached the server).
		recs, rerr := j.Records()
		if rerr != nil || len(recs) != 1 {
			t.Fatalf("journal: %d records, %v", len(recs), rerr)
		}
		rec, seen := recs[0], srv.attempts()
		var perr *PendingError
		switch {
		case resp != nil:
			if rec.State != StateSettled || rec.Status != resp.StatusCode {
				t.Fatalf("response %d returned, record %v with status %d", resp.StatusCode, rec.State, rec.Status)
			}
		case errors.As(err, &perr):
			if rec.State != StatePending || perr.Key != rec.Key || !bytes.Equal(rec.Body, body) {
				t.Fatalf("%v, but record %v key %q body %q", err, rec.State, rec.Key, rec.Body)
			}
		case errors.Is(err, ErrPermanent):
			if rec.State != StateFailed || len(seen) > 0 {
				t.Fatalf("%v after %d requests reached the server; record %v", err, len(seen), rec.State)
			}
		default:
			t.Fatalf("unexpected error %v (record %v)", err, rec.State)
		}
		t.Logf("record %v, status %d, %d attempts, %d requests seen, waits %v, error %v",
			rec.State, rec.Status, rec.Attempts, len(seen), clk.Sleeps(), err)
		if rec.Attempts < 1 || rec.Attempts > fuzzMaxAttempts {
			t.Fatalf("record counts %d attempts, limit %d", rec.Attempts, fuzzMaxAttempts)
		}
		if mode&4 != 0 && rec.OperationID != "order-4827/charge" {
			t.Fatalf("record operation ID %q", rec.OperationID)
		}

		// The same key and byte-identical body on every attempt, net/http's own
		// re-sends on a dead keep-alive connection included.
		if len(seen) > 2*fuzzMaxAttempts {
			t.Fatalf("%d requests reached the server for %d attempts", len(seen), fuzzMaxAttempts)
		}
		for i, a := range seen {
			if len(a.Keys) != 1 || a.Keys[0] != rec.Key || a.ContentLength != int64(len(body)) ||
				a.Body != nil && !bytes.Equal(a.Body, body) {
				t.Fatalf("request %d carried keys %q, length %d, body %q; the record has key %q", i+1, a.Keys, a.ContentLength, a.Body, rec.Key)
			}
		}

		// Waits in (0, cap], none after the last attempt, none past the deadline.
		sleeps := clk.Sleeps()
		if len(sleeps) >= fuzzMaxAttempts {
			t.Fatalf("%d waits for at most %d attempts", len(sleeps), fuzzMaxAttempts)
		}
		limit := max(tr.cfg.MaxInterval, tr.cfg.MaxRetryAfter)
		var total time.Duration
		for _, d := range sleeps {
			if d <= 0 || d > limit {
				t.Fatalf("wait %v outside (0, %v]", d, limit)
			}
			total += d
		}
		if !deadline.IsZero() && !start.Add(total).Before(deadline) {
			t.Fatalf("waited %v in all, past the deadline %v away", total, deadline.Sub(start))
		}

		// No goroutine (so no connection, no unclosed body) outlives the call.
		j.Close()
		if n := leakcheck.Wait(before, 2*time.Second); n > before {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}
