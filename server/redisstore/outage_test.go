// outage_test.go: S37 on Redis. While the middleware cannot reach Redis it answers 503
// problem+json and never runs the handler; once Redis answers again, the same key works
// normally. The real Redis is never stopped: the outage is a client pointed at a closed
// loopback port, or a proxy in front of Redis that the test cuts and restores.

package redisstore_test

import (
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
)

const s37Body = `{"amount":900,"currency":"EUR"}`

// wantUnavailable fails t unless a is the middleware's 503 for a Store it cannot reach.
func wantUnavailable(t *testing.T, a answer) {
	t.Helper()
	if a.Status != http.StatusServiceUnavailable {
		t.Fatalf("answer %d %s while Redis is down, want 503", a.Status, a.Body)
	}
	if typ := a.ProblemType(t); typ != server.ProblemUnavailable {
		t.Errorf("503 %q, want %q", typ, server.ProblemUnavailable)
	}
	if ra := a.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
}

// wantFresh fails t unless the key runs the handler now (201, not a replay), and the
// next copy replays it.
func wantFresh(t *testing.T, in *instance, key string) {
	t.Helper()
	first := in.post(key, s37Body)
	if first.Status != http.StatusCreated || first.Replayed() {
		t.Fatalf("answer %d %s (replayed %v) once Redis is back, want a fresh 201", first.Status, first.Body, first.Replayed())
	}
	checkReplay(t, first, in.post(key, s37Body))
}

// A Store whose Redis went away after Open (which checks it answers): 503, the handler not
// run, nothing written; then an instance on the real Redis takes the same key normally.
func TestS37RedisDown(t *testing.T) {
	leakcheck.Check(t)
	rdb := newClient(t)
	prefix := newPrefix(t, rdb)
	h := &payments{}
	obs := &observer{}

	p := newProxy(t, redisAddr())
	gone := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { gone.Close() })
	down := newInstance(t, gone, prefix, server.Options{Observer: obs}, h)
	p.down()
	for range 2 {
		wantUnavailable(t, down.post("k-s37", s37Body))
	}
	if h.runs.Load() != 0 || obs.storeErrors.Load() != 2 {
		t.Fatalf("handler ran %d times, %d store errors; want 0 and 2", h.runs.Load(), obs.storeErrors.Load())
	}
	if n := len(rdb.Keys(t.Context(), prefix+"*").Val()); n != 0 {
		t.Errorf("%d keys under the test's prefix after the outage, want 0", n)
	}

	wantFresh(t, newInstance(t, rdb, prefix, server.Options{}, h), "k-s37")
	if h.runs.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", h.runs.Load())
	}
}

// Redis goes away under a running instance (a proxy cut mid-test, its connections reset)
// and comes back on the same address: the instance answers 503 meanwhile, for a new key
// and for a stored one alike, and afterwards both work normally with the same client.
func TestS37RedisDownMidTest(t *testing.T) {
	leakcheck.Check(t)
	rdb := newClient(t)
	prefix := newPrefix(t, rdb)
	p := newProxy(t, redisAddr())
	viaProxy := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: 1, DialerRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { viaProxy.Close() })
	h := &payments{}
	in := newInstance(t, viaProxy, prefix, server.Options{}, h)

	stored := in.post("k-before", s37Body)
	if stored.Status != http.StatusCreated {
		t.Fatalf("answer %d %s before the outage, want 201", stored.Status, stored.Body)
	}
	p.down()
	wantUnavailable(t, in.post("k-during", s37Body))
	wantUnavailable(t, in.post("k-before", s37Body))
	if h.runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1 (before the outage only)", h.runs.Load())
	}

	p.up()
	wantFresh(t, in, "k-during")
	checkReplay(t, stored, in.post("k-before", s37Body))
	if h.runs.Load() != 2 {
		t.Errorf("handler ran %d times, want 2", h.runs.Load())
	}
}
