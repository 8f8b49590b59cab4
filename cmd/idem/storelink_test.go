package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// echoServer echoes what each connection sends and keeps what it received, so a test can
// tell what reached the store's side of a link.
type echoServer struct {
	ln net.Listener
	mu sync.Mutex
	in []byte
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &echoServer{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					e.mu.Lock()
					e.in = append(e.in, buf[:n]...)
					e.mu.Unlock()
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			})
		}
	})
	return e
}

// received returns what the server has read so far, over all connections.
func (e *echoServer) received() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return string(e.in)
}

func newTestLink(t *testing.T, store string) *storeLink {
	t.Helper()
	l, err := newStoreLink(store)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func dialLink(t *testing.T, l *storeLink) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// readWithin reads len(want) bytes from c within d.
func readWithin(c net.Conn, n int, d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// The store acts on what the client wrote, then the client's connection is reset before
// the reply: the client gets ECONNRESET, never the reply. The link then stays reset for
// that connection; a new one after the heal works.
func TestStoreLinkResetAfterWrite(t *testing.T) {
	e := newEchoServer(t)
	l := newTestLink(t, e.ln.Addr().String())
	c := dialLink(t, l)
	_, err := c.Write([]byte("warm"))
	require.NoError(t, err)
	got, err := readWithin(c, 4, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "warm", got)

	l.setMode(linkReset)
	_, err = c.Write([]byte("pay!"))
	require.NoError(t, err)
	_, err = readWithin(c, 4, 5*time.Second)
	require.ErrorIs(t, err, syscall.ECONNRESET)
	require.Equal(t, "warmpay!", e.received(), "the store got the command")
	require.Equal(t, int64(1), l.Stats().Resets)

	l.setMode(linkPass)
	c2 := dialLink(t, l)
	_, err = c2.Write([]byte("next"))
	require.NoError(t, err)
	got, err = readWithin(c2, 4, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "next", got)
}

// TestStoreLinkResetOnRedis is the same on a real Redis: SET through the link fails with
// a reset, yet the value is there, as after a reply lost on the way back.
func TestStoreLinkResetOnRedis(t *testing.T) {
	addr := testRedis(t)
	l := newTestLink(t, addr)
	rc := redis.NewClient(&redis.Options{Addr: l.Addr(), MaxRetries: -1})
	defer rc.Close()
	direct := redis.NewClient(&redis.Options{Addr: addr})
	defer direct.Close()
	ctx := context.Background()
	key := "idem-storelink-test:" + rand.Text()
	defer direct.Del(ctx, key)
	require.NoError(t, rc.Ping(ctx).Err())

	l.setMode(linkReset)
	err := rc.Set(ctx, key, "paid", time.Minute).Err()
	// go-redis reports the reset as EOF (and, with its default MaxRetries, sends the
	// command again: not here).
	require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF), "a reset: %v", err)
	require.Equal(t, "paid", direct.Get(ctx, key).Val(), "Redis applied the SET")

	l.setMode(linkPass)
	require.NoError(t, rc.Ping(ctx).Err(), "the client reconnects after the heal")
}

// Replies held: the request reaches the store, a read with a deadline times out; after
// the heal the held reply arrives, late, on the same connection.
func TestStoreLinkHoldReplies(t *testing.T) {
	e := newEchoServer(t)
	l := newTestLink(t, e.ln.Addr().String())
	c := dialLink(t, l)
	l.setMode(linkHold)
	_, err := c.Write([]byte("ping"))
	require.NoError(t, err)
	_, err = readWithin(c, 4, 200*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Eventually(t, func() bool { return e.received() == "ping" }, 5*time.Second, 5*time.Millisecond,
		"the store got the request")

	l.setMode(linkPass)
	got, err := readWithin(c, 4, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ping", got, "the held reply, late")
	require.Equal(t, linkStats{Conns: 1, HeldReplies: 1}, l.Stats())
	var slowest time.Duration // noted once the proxy's write returned, maybe after our read
	require.Eventually(t, func() bool {
		slowest = max(slowest, l.takeSlowest())
		return slowest >= 200*time.Millisecond
	}, 5*time.Second, time.Millisecond, "the call waited for the heal")
	require.Zero(t, l.takeSlowest(), "taken")
}

// TestStoreLinkHoldOnRedis: a go-redis call whose reply is held times out on its read
// timeout, though Redis applied it; the client closed that connection, so its reply is
// never delivered, and the next call after the heal works on a new one.
func TestStoreLinkHoldOnRedis(t *testing.T) {
	l, rc, direct, key := redisThroughLink(t)
	ctx := context.Background()

	l.setMode(linkHold)
	err := rc.Set(ctx, key, "paid", time.Minute).Err()
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a timeout: %v", err)
	require.Equal(t, "paid", direct.Get(ctx, key).Val(), "Redis applied the SET")

	l.setMode(linkPass)
	require.NoError(t, rc.Ping(ctx).Err())
	require.Eventually(t, func() bool { return l.Stats().LostReplies == 1 }, 5*time.Second, 5*time.Millisecond)
}

// A partition: nothing reaches the store, nothing comes back, nothing is reset, and a new
// connection carries nothing either. After the heal, what was sent is delivered, late,
// and its replies come back.
func TestStoreLinkPartitionThenHeal(t *testing.T) {
	e := newEchoServer(t)
	l := newTestLink(t, e.ln.Addr().String())
	c := dialLink(t, l)
	l.setMode(linkPartition)
	_, err := c.Write([]byte("late"))
	require.NoError(t, err)
	c2 := dialLink(t, l) // made during the partition
	_, err = c2.Write([]byte("new!"))
	require.NoError(t, err)
	_, err = readWithin(c, 4, 300*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "silent: no reply, no reset")
	require.Empty(t, e.received(), "nothing reached the store")

	l.setMode(linkPass)
	for _, conn := range []net.Conn{c, c2} {
		got, err := readWithin(conn, 4, 5*time.Second)
		require.NoError(t, err)
		require.Contains(t, []string{"late", "new!"}, got)
	}
	require.ElementsMatch(t, []string{"late", "new!"}, []string{e.received()[:4], e.received()[4:]})
	require.Equal(t, linkStats{Conns: 2, HeldRequests: 2}, l.Stats())
}

// TestStoreLinkPartitionOnRedis: a SET sent during a partition times out and has not
// happened; the client gives up and closes, and after the heal Redis gets the SET late
// and applies it: a late request, which fencing must keep from doing harm.
func TestStoreLinkPartitionOnRedis(t *testing.T) {
	l, rc, direct, key := redisThroughLink(t)
	ctx := context.Background()

	l.setMode(linkPartition)
	err := rc.Set(ctx, key, "paid", time.Minute).Err()
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a timeout: %v", err)
	time.Sleep(100 * time.Millisecond)
	require.Zero(t, direct.Exists(ctx, key).Val(), "the SET did not get through")

	l.setMode(linkPass)
	require.Eventually(t, func() bool { return direct.Get(ctx, key).Val() == "paid" }, 5*time.Second, 5*time.Millisecond,
		"the SET arrives after the heal")
	require.NoError(t, rc.Ping(ctx).Err())
}

// testRedis returns the address of the Redis the tests use (IDEM_REDIS_ADDR, by default
// the local one), or skips the test without one (fails it under CI).
func testRedis(t *testing.T) string {
	t.Helper()
	addr := cmp.Or(os.Getenv("IDEM_REDIS_ADDR"), "127.0.0.1:6379")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Redis at %s: %v (CI is set: the server must run)", addr, err)
		}
		t.Skipf("Redis not reachable at %s (set IDEM_REDIS_ADDR): %v", addr, err)
	}
	c.Close()
	return addr
}

// redisThroughLink returns a link to the test Redis, a client through it (no retries, a
// 200 ms read timeout) that has answered a PING, a direct client, and a key of the test's
// own, deleted at its end.
func redisThroughLink(t *testing.T) (*storeLink, *redis.Client, *redis.Client, string) {
	t.Helper()
	addr := testRedis(t)
	l := newTestLink(t, addr)
	rc := redis.NewClient(&redis.Options{Addr: l.Addr(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rc.Close() })
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { direct.Close() })
	key := "idem-storelink-test:" + rand.Text()
	t.Cleanup(func() { direct.Del(context.Background(), key) })
	require.NoError(t, rc.Ping(context.Background()).Err())
	return l, rc, direct, key
}

// A slow link relays each read slowBy late, both ways: a round trip takes two of them, and
// the link notes it as its slowest call; healed, a round trip is quick again. A client that
// gives up on a slow call leaves it counted as unanswered.
func TestStoreLinkSlow(t *testing.T) {
	e := newEchoServer(t)
	l := newTestLink(t, e.ln.Addr().String())
	c := dialLink(t, l)
	l.setMode(linkSlow)
	start := time.Now()
	_, err := c.Write([]byte("slow"))
	require.NoError(t, err)
	got, err := readWithin(c, 4, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "slow", got)
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 2*slowBy, "a request and its reply, each slowBy late")
	var slowest time.Duration // noted once the proxy's write returned, maybe after our read
	require.Eventually(t, func() bool {
		slowest = max(slowest, l.takeSlowest())
		return slowest >= 2*slowBy
	}, 5*time.Second, time.Millisecond, "the link noted the slow call")

	_, err = c.Write([]byte("gone"))
	require.NoError(t, err)
	c.Close() // gives up before the reply
	require.Eventually(t, func() bool { return l.Stats().Unanswered == 1 }, 5*time.Second, 5*time.Millisecond,
		"a connection closed with its request unanswered")

	l.setMode(linkPass)
	c2 := dialLink(t, l)
	start = time.Now()
	_, err = c2.Write([]byte("fast"))
	require.NoError(t, err)
	got, err = readWithin(c2, 4, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "fast", got)
	require.Less(t, time.Since(start), slowBy, "healed")
}
