// This file holds the floors' sending steps (floor.go, floor_contract.go,
// pgfloor.go, pgfloor_contract.go): read the request's body once, to journal
// it, then make the clone of the request they send, which carries the key
// and a body that can be re-read (the contract floors send it as
// floor_attempt.go does).

package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// readBody reads and closes req's body; nil if it has none.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	return body, err
}

// withKey returns a clone of req under ctx with key in its Idempotency-Key
// header and body as its body (GetBody set, for net/http's own retries).
func withKey(ctx context.Context, req *http.Request, key string, body []byte) *http.Request {
	out := req.Clone(ctx)
	out.Header.Set("Idempotency-Key", key)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	return out
}
