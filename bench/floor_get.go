// This file holds the contract floor of a GET: the least a RoundTripper
// doing what idem's contract asks of a request it does not journal does on
// each call that succeeds at once: one attempt (floor_attempt.go). It
// leaves out what idem adds around that: the retry budget, the Observer,
// httptrace, ResponseInfo, redirects and the error classification of a
// failed attempt. So "idem GET ÷ contract floor GET" is idem's own work, and
// "contract floor GET ÷ net/http GET" the contract's.

package main

import (
	"context"
	"net/http"
)

// contractGETRow is the name of the GET contract floor's row.
const contractGETRow = "contract floor GET"

// getContractFloor is safe for concurrent use.
type getContractFloor struct{ base http.RoundTripper }

func (f getContractFloor) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	r := req.WithContext(ctx)
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	return sendAttempt(f.base, r, cancel, false)
}
