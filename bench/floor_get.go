// This file holds the contract floor of a GET: the least a RoundTripper
// doing what idem's contract asks of a request it does not journal does on
// each call that succeeds at once. It sends each attempt under its own
// timeout (Options.AttemptTimeout), on a copy of the request that carries the
// attempt header (idem.AttemptHeader: the RoundTripper contract forbids
// changing the caller's), and classifies the answer (a 503 would be retried);
// the timeout's context ends when the body is closed. It
// leaves out what idem adds around that: the retry budget, the Observer,
// httptrace, ResponseInfo, redirects and the error classification of a
// failed attempt. So "idem GET ÷ contract floor GET" is idem's own work, and
// "contract floor GET ÷ net/http GET" the contract's.

package main

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/idem-go/idem"
)

// contractGETRow is the name of the GET contract floor's row.
const contractGETRow = "contract floor GET"

// getContractFloor is safe for concurrent use.
type getContractFloor struct{ base http.RoundTripper }

func (f getContractFloor) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), idem.DefaultAttemptTimeout)
	r := req.WithContext(ctx)
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set(idem.AttemptHeader, "attempt=1; max=6")
	resp, err := f.base.RoundTrip(r)
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

var errRetryable = errors.New("contract floor GET: a retryable answer, which the bench's server never gives")

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
