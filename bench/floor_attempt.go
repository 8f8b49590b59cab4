// This file holds one attempt as idem's contract asks it of every request,
// journaled or not, for the contract floors (floor_get.go,
// floor_contract.go, pgfloor_contract.go): the request the floor sends is a
// copy of the caller's (the RoundTripper contract forbids changing the
// caller's) that carries the attempt header (idem.AttemptHeader), under its
// own timeout (Options.AttemptTimeout, on by default with no way to turn it
// off), ended when the body is closed; the answer's status is classified (a
// 503 would be retried).

package main

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/idem-go/idem"
)

// attemptContext is the context of one attempt: parent under idem's default
// attempt timeout.
func attemptContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, idem.DefaultAttemptTimeout)
}

// sendAttempt sends out, the floor's own copy of the caller's request made
// under an attemptContext that cancel ends, as the first of idem's default
// six attempts. The response's body ends the attempt when closed.
func sendAttempt(base http.RoundTripper, out *http.Request, cancel context.CancelFunc) (*http.Response, error) {
	out.Header.Set(idem.AttemptHeader, "attempt=1; max=6")
	resp, err := base.RoundTrip(out)
	if err != nil {
		cancel()
		return nil, err
	}
	if retryableStatus(resp.StatusCode) {
		// A retrying client would drain, close and try again here; the bench's
		// server never answers so.
		resp.Body.Close()
		cancel()
		return nil, errRetryable
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// retryableStatus reports whether status asks for another attempt (DESIGN:
// classification).
func retryableStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

var errRetryable = errors.New("contract floor: a retryable answer, which the bench's server never gives")

// cancelOnClose ends an attempt's context once its body is closed, as
// context.WithTimeout asks.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
