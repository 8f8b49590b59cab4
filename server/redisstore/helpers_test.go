// helpers_test.go has what the tests share: a client for the Redis under test (skipped, or
// failed in CI, when it does not answer), a random key prefix per test whose keys are
// deleted afterwards, and a Store on both.

package redisstore_test

import (
	"context"
	"crypto/rand"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/server/redisstore"
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
