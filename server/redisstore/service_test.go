// service_test.go has what the scenario tests (S31, S32, S37) share: an instance of a
// payments service (its own go-redis client, a Store, the middleware, a loopback HTTP
// server), requests read in full, a counting Observer and a gate that holds handlers.

package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/redisstore"
)

// instance is one middleware instance of the payments service on a loopback server.
type instance struct {
	t   *testing.T
	url string
}

// newInstance starts an instance on client, keys under prefix, with opts (Store, if
// nil, a Store on client) around handler. t's cleanup closes it.
func newInstance(t *testing.T, client *redis.Client, prefix string, opts server.Options, handler http.Handler) *instance {
	t.Helper()
	if opts.Store == nil {
		opts.Store = storeOn(t, client, prefix)
	}
	mw, err := server.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = mw.Shutdown(ctx) // a Store down for good leaves repeats to give up
	})
	srv := httptest.NewServer(mw.Wrap(handler))
	t.Cleanup(srv.Close)
	return &instance{t: t, url: srv.URL}
}

// storeOn returns a Store on client under prefix.
func storeOn(t testing.TB, client redis.UniversalClient, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), client, &redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// payments is the handler: it counts its runs, waits at gate (nil: no wait) and answers
// 201 with a payment.
type payments struct {
	runs atomic.Int64
	gate *gate
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.runs.Add(1)
	if p.gate != nil {
		p.gate.wait()
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/pay_%d", n))
	w.Header()["X-Trace"] = []string{"one", "two"}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":"pay_%d","request":%s}`+"\n", n, body)
}

// answer is a response read in full.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) replayed() bool { return a.header.Get("Idempotent-Replayed") == "true" }

// problemType returns the fragment of a problem+json answer's type, failing t if the
// answer is not problem+json.
func (a answer) problemType(t *testing.T) string {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("answer %d with Content-Type %q, want a problem: %s", a.status, ct, a.body)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(a.body, &p); err != nil || p.Status != a.status {
		t.Fatalf("problem %s: %v (status %d, answer %d)", a.body, err, p.Status, a.status)
	}
	_, frag, _ := strings.Cut(p.Type, "#")
	return frag
}

// post sends a POST /payments with key and body and reads the answer; an error fails t.
func (in *instance) post(key, body string) answer {
	in.t.Helper()
	a, err := send(context.Background(), in.url, key, body)
	if err != nil {
		in.t.Fatalf("POST: %v", err)
	}
	return a
}

// send is post returning the transport's error, for requests that may fail. Each goes
// on a fresh connection, so net/http never re-sends it behind the test's back.
func send(ctx context.Context, url, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/payments", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// eventually polls cond every 10 ms for up to limit, failing t if it never holds.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// observer counts conflicts and store errors, for every instance it is given to. It is
// safe for concurrent use.
type observer struct {
	server.NopObserver
	conflicts, storeErrors atomic.Int64
}

func (o *observer) Conflict(*http.Request, bool)    { o.conflicts.Add(1) }
func (o *observer) StoreError(*http.Request, error) { o.storeErrors.Add(1) }

// countingStore counts the claims that found a live record: copies polling for it.
type countingStore struct {
	server.Store
	found atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	cl, err := s.Store.Claim(ctx, sc, token, fp, lease, ttl)
	if err == nil && !cl.Claimed {
		s.found.Add(1)
	}
	return cl, err
}

// gate holds handlers until released. Whoever holds them releases it before the test
// ends (fire does, on every path): the servers' cleanups wait for their handlers.
type gate struct {
	open chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) wait()    { <-g.open }
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }
