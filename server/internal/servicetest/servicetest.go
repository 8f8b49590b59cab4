// Package servicetest holds what the stores' HTTP tests share: a request sent to a
// payments service on a fresh connection and its answer read in full, and a poll for a
// condition. The stores' own modules (pgstore, redisstore) test through it.
package servicetest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Answer is a response read in full.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Replayed reports whether the middleware replayed a stored answer.
func (a Answer) Replayed() bool { return a.Header.Get("Idempotent-Replayed") == "true" }

// ProblemType returns the fragment of a problem+json answer's type, failing tb if the
// answer is not problem+json or its status differs from the answer's.
func (a Answer) ProblemType(tb testing.TB) string {
	tb.Helper()
	if ct := a.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("answer %d with Content-Type %q, want a problem: %s", a.Status, ct, a.Body)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(a.Body, &p); err != nil || p.Status != a.Status {
		tb.Fatalf("problem %s: %v (status %d, answer %d)", a.Body, err, p.Status, a.Status)
	}
	_, frag, _ := strings.Cut(p.Type, "#")
	return frag
}

// Send sends POST base/payments with key and a JSON body on a fresh connection (so
// net/http never re-sends it behind the test's back) and reads the answer.
func Send(ctx context.Context, base, key, body string) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/payments", strings.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Eventually polls cond every 5 ms for up to limit, failing tb if it never holds.
func Eventually(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
