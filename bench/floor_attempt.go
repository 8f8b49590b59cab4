// This file holds one attempt as idem's contract asks it of every request,
// journaled or not, for the contract floors (floor_get.go,
// floor_contract.go, floorresume_contract.go, pgfloor_contract.go): the
// request the floor sends is a copy of the caller's (the RoundTripper
// contract forbids changing the caller's) that carries the attempt header
// (idem.AttemptHeader) of the first of idem's default attempts; a timeout
// (Options.AttemptTimeout, on by default with no way to turn it off) runs
// until the response headers arrive; the attempt's context ends when the
// body is closed; the answer is classified as idem's DefaultClassifier does
// (a 503, or a 409 to a keyed request, would be tried again).

package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/idem-go/idem"
)

// firstAttempt is the AttemptHeader's value on the first of idem's default
// attempts.
var firstAttempt = "attempt=1; max=" + strconv.Itoa(idem.DefaultMaxAttempts)

// sendAttempt sends out, the floor's own copy of the caller's request made
// under ctx, a context.WithCancel that cancel ends, as an attempt; keyed
// tells whether out carries an idempotency key. The response's body ends
// the attempt when closed.
func sendAttempt(base http.RoundTripper, out *http.Request, cancel context.CancelFunc, keyed bool) (*http.Response, error) {
	out.Header.Set(idem.AttemptHeader, firstAttempt)
	timeout := time.AfterFunc(idem.DefaultAttemptTimeout, cancel)
	resp, err := base.RoundTrip(out)
	timeout.Stop() // the timeout runs until the response headers
	if err != nil {
		cancel()
		return nil, err
	}
	if idem.DefaultClassifier(idem.Attempt{Request: out, Response: resp, Keyed: keyed, Wrote: true, N: 1}) != idem.ClassFinal {
		// A retrying client would drain, close and try again here; the bench's
		// server never answers so.
		resp.Body.Close()
		cancel()
		return nil, errRetryable
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

var errRetryable = errors.New("contract floor: an answer idem would try again, which the bench's server never gives")

// cancelOnClose ends an attempt's context once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
