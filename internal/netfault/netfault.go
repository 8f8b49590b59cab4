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
// The socket side, the forwarder and the dial from inside the namespace, is
// in dial.go.
package netfault

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

const (
	// nsPrefix starts the name of every namespace New makes:
	// nsPrefix<pid>-<n>, so that a namespace left by a process that died
	// can be told from one in use.
	nsPrefix = "idemnf-"
	// devPrefix starts the name of both ends of a veth pair, the root
	// end's followed by <block>r, the namespace end's by <block>n.
	devPrefix = "idemnf"
	// nsDir is where ip(8) names network namespaces.
	nsDir = "/run/netns"
	// blocks is the number of /30 blocks in 198.18.0.0/15. The first one,
	// 198.18.0.0/30, is left to setups made by hand.
	blocks = 1 << 15
	// probes is how many blocks New tries before giving up.
	probes = 8
)

var (
	// base is the first address of 198.18.0.0/15.
	base = netip.AddrFrom4([4]byte{198, 18, 0, 0})
	// links numbers the namespaces of this process.
	links atomic.Int64
)

// Link is one namespace joined to the root namespace, with its forwarder.
// Its methods are safe for concurrent use; the faults and Heal, like
// t.Fatal, must be called from the goroutine running the test.
type Link struct {
	tb      testing.TB
	ns      string // the namespace's name, under nsDir
	rootDev string // the veth end in the root namespace
	nsDev   string // the veth end in the namespace
	rootIP  netip.Addr
	nsIP    netip.Addr
	fwd     *forwarder

	hasNS   bool // the namespace exists: teardown deletes it
	hasPair bool // the veth pair exists: teardown deletes it

	mu      sync.Mutex
	down    bool // CutBoth
	outward bool // CutOutward
	replies bool // CutReplies
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
	sweep()
	l := &Link{tb: tb, ns: fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), links.Add(1))}
	tb.Cleanup(l.teardown)
	if err := l.setUp(); err != nil {
		tb.Fatalf("netfault: %v", err)
	}
	fwd, err := listen(l.rootIP, l.rootDev, target)
	if err != nil {
		tb.Fatalf("netfault: %v", err)
	}
	l.fwd = fwd
	return l
}

// Addr returns the forwarder's address as the namespace sees it, an
// IPv4 host:port, for the client's configuration.
func (l *Link) Addr() string { return l.fwd.ln.Addr().String() }

// setUp makes the namespace, then the veth pair on a free /30, and brings
// both ends up with their addresses.
func (l *Link) setUp() error {
	if err := l.addNamespace(); err != nil {
		return err
	}
	if err := l.addPair(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"addr", "add", l.rootIP.String() + "/30", "dev", l.rootDev},
		{"link", "set", l.rootDev, "up"},
		{"-n", l.ns, "addr", "add", l.nsIP.String() + "/30", "dev", l.nsDev},
		{"-n", l.ns, "link", "set", l.nsDev, "up"},
		{"-n", l.ns, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// addNamespace makes the namespace. One of the same name can only have been
// left by an earlier process with this process's pid (the name's number is
// this process's own), so it is deleted and made again.
func (l *Link) addNamespace() error {
	err := ip("netns", "add", l.ns)
	if err != nil {
		if _, serr := os.Stat(filepath.Join(nsDir, l.ns)); serr != nil {
			return err
		}
		if err := ip("netns", "del", l.ns); err != nil {
			return err
		}
		err = ip("netns", "add", l.ns)
	}
	l.hasNS = err == nil
	return err
}

// addPair makes the veth pair, its far end directly in the namespace, on a
// /30 picked at random. The root end's name, which holds the block, is made
// atomically by the kernel: if another link (of this or another process)
// holds it, making it fails and the next block is tried. A block whose
// addresses are on an interface already is passed over.
func (l *Link) addPair() error {
	start := 1 + rand.IntN(blocks-1)
	var err error
	for i := range probes {
		n := 1 + (start-1+i)%(blocks-1)
		root, peer := block(n)
		if inUse(root) {
			continue
		}
		rootDev, nsDev := fmt.Sprintf("%s%dr", devPrefix, n), fmt.Sprintf("%s%dn", devPrefix, n)
		if err = ip("link", "add", rootDev, "type", "veth", "peer", "name", nsDev, "netns", l.ns); err != nil {
			continue
		}
		l.hasPair = true
		l.rootDev, l.nsDev, l.rootIP, l.nsIP = rootDev, nsDev, root, peer
		return nil
	}
	return fmt.Errorf("no free /30 in 198.18.0.0/15 after %d tries (last: %v)", probes, err)
}

// block returns the root end's and the namespace end's addresses in the
// n-th /30 of 198.18.0.0/15.
func block(n int) (root, peer netip.Addr) {
	b := base.As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(n)*4
	a := netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, v)))
	return a.Next(), a.Next().Next()
}

// inUse reports whether an interface of the root namespace has an address
// in the /30 of root: a hand-made setup that New must not collide with.
func inUse(root netip.Addr) bool {
	p := netip.PrefixFrom(root, 30).Masked()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ones, _ := ipn.Mask.Size()
		if q, ok := netip.AddrFromSlice(ipn.IP); ok && netip.PrefixFrom(q.Unmap(), ones).Overlaps(p) {
			return true
		}
	}
	return false
}

// teardown closes the forwarder, then deletes the veth pair (both ends,
// their addresses, routes and neighbour entries go with it, even while a
// socket still keeps the namespace alive) and the namespace.
func (l *Link) teardown() {
	l.tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fwd != nil {
		l.fwd.close()
	}
	if l.hasPair {
		if err := ip("link", "del", l.rootDev); err != nil {
			l.tb.Errorf("netfault: %v", err)
		}
	}
	if l.hasNS {
		if err := ip("netns", "del", l.ns); err != nil {
			l.tb.Errorf("netfault: %v", err)
		}
	}
}

// sweep deletes the namespaces and veth pairs that New made in processes
// that no longer run: a test binary killed by go test's -timeout runs no
// cleanup. It is best effort, and another New may be sweeping the same
// namespace, so it reports nothing.
func sweep() {
	entries, err := os.ReadDir(nsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := namespacePID(e.Name())
		if !ok || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue
		}
		// The dead process's orphaned connections, still retransmitting
		// over a cut link, keep its namespace alive for minutes after the
		// name is gone, and the pair with it: delete the pair first.
		for _, dev := range namespaceEnds(e.Name()) {
			if n, ok := strings.CutSuffix(dev, "n"); ok {
				_ = ip("link", "del", n+"r")
			}
		}
		_ = ip("netns", "del", e.Name())
	}
}

// namespaceEnds returns the names of the veth ends New made in namespace
// ns.
func namespaceEnds(ns string) []string {
	out, err := exec.Command("ip", "-n", ns, "-j", "link", "show", "type", "veth").Output()
	if err != nil {
		return nil
	}
	var links []struct {
		Name string `json:"ifname"`
	}
	if json.Unmarshal(out, &links) != nil {
		return nil
	}
	var ends []string
	for _, l := range links {
		if strings.HasPrefix(l.Name, devPrefix) {
			ends = append(ends, l.Name)
		}
	}
	return ends
}

// namespacePID returns the pid in a name nsPrefix<pid>-<n>.
func namespacePID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, nsPrefix)
	if !ok {
		return 0, false
	}
	p, n, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	if _, nerr := strconv.Atoi(n); err != nil || nerr != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// require skips tb, in one line, if New cannot run here, or fails it when
// the CI environment variable is set: tests that need a service must not
// pass unrun in CI.
func require(tb testing.TB) {
	tb.Helper()
	why := unavailable()
	switch {
	case why == "":
	case os.Getenv("CI") != "":
		tb.Fatalf("netfault: %s (CI is set, so this fails instead of skipping)", why)
	default:
		tb.Skipf("netfault: %s", why)
	}
}

// unavailable says why New cannot run here, or returns "".
func unavailable() string {
	const need = 1<<12 | 1<<21 // CAP_NET_ADMIN, CAP_SYS_ADMIN
	if caps, err := effectiveCaps(); err != nil || caps&need != need {
		return "needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to make network namespaces"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "needs ip(8) from iproute2 in PATH"
	}
	return ""
}

// effectiveCaps returns this process's effective capabilities, from the
// CapEff line of /proc/self/status.
func effectiveCaps() (uint64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// ip runs ip(8) with args; its error includes the command and its output.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
