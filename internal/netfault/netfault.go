//go:build linux

// Package netfault lets a test cut its own process's connections to a
// service (Redis, PostgreSQL) with real network faults: packets dropped by
// the kernel, not errors injected by a proxy. It is for the tests of this
// repository's modules and needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and
// ip(8) from iproute2; without them New skips the test, or fails it when the
// CI environment variable is set.
//
// New makes a network namespace joined to the root namespace by a veth pair,
// whose two ends share a /30 out of 198.18.0.0/15 (the range RFC 2544 and
// RFC 6890 set aside for benchmarking networks). A forwarder in the test
// process listens on the root end and pipes each connection to the target
// address; its sockets are bound to the root end, so that even with the
// link down nothing of theirs leaves by another route. Link.DialContext
// connects from inside the namespace, so every connection made with it
// crosses the veth pair, where the faults act:
//
//   - CutBoth sets the root end down. Established connections go silent
//     both ways and nothing is reset; a new connect waits out its deadline.
//   - CutOutward adds a blackhole route to the root end inside the
//     namespace. The client's packets are dropped, so established
//     connections go silent; a new connect fails at once with EINVAL.
//   - CutReplies points the root namespace's neighbour (ARP) entry for the
//     namespace end at a MAC address no one has. Requests reach the
//     service and are applied; their replies are lost, and a new connect
//     waits out its deadline.
//
// Heal undoes them. Without a deadline a client blocks on a silent cut until
// the kernel gives up (tcp_retries2, about 15 minutes).
//
//	link := netfault.New(t, "127.0.0.1:6379")
//	rdb := redis.NewClient(&redis.Options{
//		Addr: link.Addr(), Dialer: link.DialContext, ContextTimeoutEnabled: true,
//	})
//	t.Cleanup(func() { rdb.Close() })
//	link.CutReplies()
//
// For pgx, point the connection string at Addr() and set
// pgconn.Config.DialFunc (ConnConfig.DialFunc of a pgxpool.Config) to
// DialContext. go-redis applies a context's deadline to an established
// connection only with ContextTimeoutEnabled; without it a call on a silent
// connection waits out ReadTimeout (5 s by default).
//
// The namespace, the veth pair, the forwarder and the cuts are
// internal/netlab's (a Pair and a Forwarder); this package is the
// testing.TB layer over them.
package netfault

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/idem-go/idem/internal/netlab"
)

// Link is one namespace joined to the root namespace, with its forwarder.
// Its methods are safe for concurrent use; the faults and Heal, like
// t.Fatal, must be called from the goroutine running the test.
type Link struct {
	tb   testing.TB
	ns   *netlab.Namespace
	pair *netlab.Pair
	fwd  *netlab.Forwarder

	mu sync.Mutex // serialises teardown with the faults
}

// New makes a namespace and its link, starts the forwarder to target (a
// host:port the root namespace can reach, such as "127.0.0.1:6379"), and
// registers their teardown with tb.Cleanup: the forwarder and its
// connections closed, the namespace and the veth pair deleted, nothing left
// in the root namespace. Call it before making the client that will use the
// link, so that the client's own cleanup, registered later, runs first.
func New(tb testing.TB, target string) *Link {
	tb.Helper()
	require(tb)
	netlab.Sweep()
	l := &Link{tb: tb}
	tb.Cleanup(l.teardown)
	var err error
	if l.ns, err = netlab.NewNamespace(); err != nil {
		tb.Fatalf("netfault: %v", err)
	}
	if l.pair, err = netlab.NewRootPair(l.ns); err != nil {
		tb.Fatalf("netfault: %v", err)
	}
	if l.fwd, err = netlab.ForwardRoot(l.pair, target); err != nil {
		tb.Fatalf("netfault: %v", err)
	}
	return l
}

// Addr returns the forwarder's address as the namespace sees it, an
// IPv4 host:port, for the client's configuration.
func (l *Link) Addr() string { return l.fwd.Addr() }

// DialContext connects to addr (normally Addr()) from inside the link's
// namespace, so the connection crosses the link for its whole life; it
// honours ctx's deadline and cancellation. It has the signature of
// go-redis's Options.Dialer and pgconn's Config.DialFunc. addr should be an
// IP address: a host name is looked up from the root namespace.
func (l *Link) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return l.ns.DialContext(ctx, network, addr)
}

// teardown closes the forwarder, then deletes the veth pair (both ends,
// their addresses, routes and neighbour entries go with it, even while a
// socket still keeps the namespace alive) and the namespace.
func (l *Link) teardown() {
	l.tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fwd != nil {
		l.fwd.Close()
	}
	if l.pair != nil {
		if err := l.pair.Delete(); err != nil {
			l.tb.Errorf("netfault: %v", err)
		}
	}
	if l.ns != nil {
		if err := l.ns.Delete(); err != nil {
			l.tb.Errorf("netfault: %v", err)
		}
	}
}

// require skips tb, in one line, if New cannot run here, or fails it when
// the CI environment variable is set: tests that need a service must not
// pass unrun in CI.
func require(tb testing.TB) {
	tb.Helper()
	why := netlab.Unavailable()
	switch {
	case why == "":
	case os.Getenv("CI") != "":
		tb.Fatalf("netfault: %s (CI is set, so this fails instead of skipping)", why)
	default:
		tb.Skipf("netfault: %s", why)
	}
}
