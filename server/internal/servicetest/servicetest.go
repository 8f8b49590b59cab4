// Package servicetest holds what the middleware's HTTP tests share, in package server and
// in the stores' modules (pgstore, redisstore): a request sent to a payments service on a
// fresh connection and its answer read in full, a poll for a condition, and an Observer
// that counts what it is told.
package servicetest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
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

// Observer is a server.Observer that counts what it is told, by name ("claimed",
// "replayed", "conflict", "conflict-stuck", "mismatch", "lease-lost", "recovered:<how>",
// "stored", "store-error", "uncertain:<call>", "resolved:<call>:<how>"), and keeps the
// sizes of the answers stored. It is safe for concurrent use.
type Observer struct {
	mu     sync.Mutex
	counts map[string]int
	stored []int
}

func (o *Observer) add(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.counts == nil {
		o.counts = map[string]int{}
	}
	o.counts[name]++
}

// Count returns how many times name was reported.
func (o *Observer) Count(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[name]
}

// StoredSizes returns the sizes Stored reported, in order.
func (o *Observer) StoredSizes() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.stored...)
}

func (o *Observer) Claimed(*http.Request)                 { o.add("claimed") }
func (o *Observer) Replayed(*http.Request, time.Duration) { o.add("replayed") }
func (o *Observer) Mismatch(*http.Request)                { o.add("mismatch") }
func (o *Observer) LeaseLost(*http.Request)               { o.add("lease-lost") }
func (o *Observer) StoreError(*http.Request, error)       { o.add("store-error") }
func (o *Observer) Recovered(_ *http.Request, rec server.Recovery) {
	o.add("recovered:" + rec.String())
}
func (o *Observer) StoreUncertain(_ *http.Request, call string, _ error) {
	o.add("uncertain:" + call)
}
func (o *Observer) StoreResolved(_ *http.Request, call, how string) {
	o.add("resolved:" + call + ":" + how)
}

func (o *Observer) Conflict(_ *http.Request, stuck bool) {
	if stuck {
		o.add("conflict-stuck")
	} else {
		o.add("conflict")
	}
}

func (o *Observer) Stored(_ *http.Request, n int) {
	o.add("stored")
	o.mu.Lock()
	o.stored = append(o.stored, n)
	o.mu.Unlock()
}

var _ server.Observer = (*Observer)(nil)
