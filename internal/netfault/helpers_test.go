//go:build linux

// helpers_test.go has what the tests share: a TCP echo server on loopback
// that reports what reaches it (internal/echotest), dials through a link, checks that what must
// come comes and what must not does not, and the check that a link's
// teardown left nothing behind.

package netfault

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/echotest"
	"github.com/idem-go/idem/internal/netlab"
)

const (
	// silence is how long a client waits to conclude that nothing comes.
	silence = 300 * time.Millisecond
	// patience bounds the waits for what must come.
	patience = echotest.Patience
)

// newEcho starts an echo server on loopback, which reports what reaches it.
func newEcho(t *testing.T) *echotest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return echotest.Serve(t, ln)
}

// newLink returns New(t, target), and checks, after its teardown, that
// nothing of it is left.
func newLink(t *testing.T, target string) *Link {
	t.Helper()
	var l *Link
	t.Cleanup(func() {
		if l != nil {
			gone(t, l)
		}
	})
	l = New(t, target)
	return l
}

// dial connects through l, within patience.
func dial(t *testing.T, l *Link) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := l.DialContext(ctx, "tcp", l.Addr())
	if err != nil {
		t.Fatalf("dial through the link: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialWithin dials through l with a deadline of d, and returns the error and
// how long the dial took.
func dialWithin(l *Link, d time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := l.DialContext(ctx, "tcp", l.Addr())
	if err == nil {
		c.Close()
	}
	return time.Since(start), err
}

// send writes msg on c; the kernel buffers it, cut or not.
func send(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(patience))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

// echoed reads msg back from c, within patience.
func echoed(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(patience))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read the echo of %q: %v", msg, err)
	}
	if string(buf) != msg {
		t.Fatalf("echoed %q, want %q", buf, msg)
	}
}

// silent checks that nothing comes back on c for the silence window, and
// that c ends with a timeout, not a reset.
func silent(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(silence))
	n, err := c.Read(make([]byte, 64))
	if n > 0 || !timeout(err) {
		t.Fatalf("read through the cut: %d bytes, %v; want a timeout", n, err)
	}
}

// gone checks that nothing of l is left: its namespace, its interface, a
// route or neighbour entry for its /30, or a TCP socket of its forwarder.
func gone(t *testing.T, l *Link) {
	t.Helper()
	if _, err := os.Stat(netlab.NSDir + "/" + l.ns.Name); err == nil {
		t.Errorf("namespace %s left", l.ns.Name)
	}
	if _, err := net.InterfaceByName(l.pair.OuterDev); err == nil {
		t.Errorf("interface %s left", l.pair.OuterDev)
	}
	prefix := netip.PrefixFrom(l.pair.OuterIP, 30).Masked().String()
	for _, argv := range [][]string{{"-4", "route", "show", "table", "all"}, {"-4", "neigh", "show"}} {
		out := ipOutput(t, argv...)
		for _, s := range []string{prefix, l.pair.OuterIP.String() + " ", l.pair.InnerIP.String() + " ", l.pair.OuterDev} {
			if strings.Contains(out, s) {
				t.Errorf("ip %s still shows %s:\n%s", strings.Join(argv, " "), s, out)
			}
		}
	}
	// A connect made during CutReplies leaves a half-open request
	// (SYN_RECV) on the forwarder's side, which its SYN-ACK timer drops,
	// up to a second later, now that the listener is closed. Bound to the
	// deleted interface, it sends nothing meanwhile.
	deadline := time.Now().Add(patience)
	for {
		left := sockets(t, l.pair.OuterIP)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("TCP sockets of the forwarder's (%s) are left:\n%s", l.pair.OuterIP, strings.Join(left, ""))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sockets returns the lines of /proc/net/tcp whose local address is a.
func sockets(t *testing.T, a netip.Addr) []string {
	t.Helper()
	b := a.As4()
	hex := fmt.Sprintf("%08X:", binary.NativeEndian.Uint32(b[:]))
	tcp, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.Lines(string(tcp)) {
		if f := strings.Fields(line); len(f) > 3 && strings.HasPrefix(f[1], hex) {
			lines = append(lines, line)
		}
	}
	return lines
}

func ipOutput(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// timeout reports whether err is a timeout: a dial that ran out its
// context's deadline ends with context.DeadlineExceeded or with the
// poller's "i/o timeout", whichever comes first.
func timeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
