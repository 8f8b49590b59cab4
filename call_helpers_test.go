// Helpers for tests that run calls and Resume passes: a gate that holds
// server handlers, RoundTrip in a goroutine, Resume that collects its
// outcomes, a base RoundTripper made of a function, and a bound on calls that
// must neither panic nor hang.

package idem

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gate holds server handlers until the test opens it. Register
// t.Cleanup(g.open) after starting the server, so that a failing test opens
// it before the server's Close waits for its handlers.
type gate struct {
	ch      chan struct{}
	open    func()
	arrived chan struct{} // receives once per handler that reaches hold
}

func newGate() *gate {
	ch := make(chan struct{})
	return &gate{ch: ch, open: sync.OnceFunc(func() { close(ch) }), arrived: make(chan struct{}, 16)}
}

// hold is what a held handler calls: it tells the test, through arrived,
// that its request is at the server, then waits until the gate opens.
func (g *gate) hold() {
	g.arrived <- struct{}{}
	<-g.ch
}

// roundTripResult is what a RoundTrip run by roundTripAsync returned.
type roundTripResult struct {
	resp *http.Response
	err  error
}

// roundTripAsync runs tr.RoundTrip(req) in a goroutine.
func roundTripAsync(tr *Transport, req *http.Request) <-chan roundTripResult {
	done := make(chan roundTripResult, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- roundTripResult{resp, err}
	}()
	return done
}

// resumeAll runs tr.Resume and returns the outcomes it reported, each
// response body read and closed (fn runs off the test goroutine, so no
// require in it).
func resumeAll(tb testing.TB, tr *Transport) []Outcome {
	tb.Helper()
	var outs []Outcome
	require.NoError(tb, tr.Resume(context.Background(), func(o Outcome) {
		if o.Response != nil {
			io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
		}
		outs = append(outs, o)
	}))
	return outs
}

// pastNextAttempt moves clk just past the record's earliest next attempt.
func pastNextAttempt(clk *fakeClock, next time.Time) {
	clk.Advance(next.Sub(clk.Now()) + time.Millisecond)
}

// roundTripFunc is a base RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// bounded runs f and fails the test if f panics, or does not return within
// 10 s: bad input must give an error, never a panic or a hang.
func bounded[T any](tb testing.TB, f func() (T, error)) (T, error) {
	tb.Helper()
	type result struct {
		v     T
		err   error
		panic string
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panic: fmt.Sprintf("%v\n%s", p, debug.Stack())}
			}
		}()
		v, err := f()
		done <- result{v: v, err: err}
	}()
	select {
	case r := <-done:
		if r.panic != "" {
			tb.Fatalf("panic: %s", r.panic)
		}
		return r.v, r.err
	case <-time.After(10 * time.Second):
		tb.Fatalf("no answer within 10 s")
		panic("unreachable")
	}
}
