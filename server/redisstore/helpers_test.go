// helpers_test.go has what the tests share: a client for the Redis under test (skipped, or
// failed in CI, when it does not answer), a random key prefix per test whose keys are
// deleted afterwards, a Store on both, and an instance of a payments service on it (its
// own go-redis client, a Store, the middleware, a loopback HTTP server) with requests read
// in full, a counting Observer and a gate that holds handlers.

package redisstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/internal/servicetest"
	"github.com/idem-go/idem/server/redisstore"
	"github.com/redis/go-redis/v9"
)

// redisAddr is the Redis the tests use: $IDEM_REDIS_ADDR, or the standard local one.
func redisAddr() string {
	if a := os.Getenv("IDEM_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// newClient returns a client of the Redis under test, closed when t ends. If Redis does
// not answer, t fails when $CI is set and is skipped otherwise.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Redis does not answer at %s ($IDEM_REDIS_ADDR): %v", redisAddr(), err)
		}
		t.Skipf("Redis does not answer at %s (set $IDEM_REDIS_ADDR); skipping: %v", redisAddr(), err)
	}
	return c
}

// newPrefix returns a key prefix of t's own, and deletes every key under it through c
// when t ends.
func newPrefix(t testing.TB, c *redis.Client) string {
	t.Helper()
	prefix := "idemtest:" + rand.Text() + ":"
	t.Cleanup(func() { deleteKeys(t, c, prefix) })
	return prefix
}

// deleteKeys deletes every key under prefix (which holds no glob character).
func deleteKeys(t testing.TB, c *redis.Client, prefix string) {
	ctx := context.Background()
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scanning the test's keys: %v", err)
		return
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Errorf("deleting the test's keys: %v", err)
		}
	}
}

// newStore returns a Store on c under a prefix of t's own.
func newStore(t testing.TB, c *redis.Client) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), c, &redisstore.Options{Prefix: newPrefix(t, c)})
	if err != nil {
		t.Fatalf("redisstore.New: %v", err)
	}
	return s
}

// closedAddr returns a loopback address where nothing listens: a Redis that is not there.
func closedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

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

// post sends a POST /payments with key and body and reads the answer; an error fails t.
func (in *instance) post(key, body string) answer {
	in.t.Helper()
	a, err := send(context.Background(), in.url, key, body)
	if err != nil {
		in.t.Fatalf("POST: %v", err)
	}
	return a
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

// answer, send and eventually are servicetest's.
type answer = servicetest.Answer

var (
	send       = servicetest.Send
	eventually = servicetest.Eventually
)
