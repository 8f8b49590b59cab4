//go:build linux

// helpers_test.go has what the tests share: the skip (or, in CI, the
// failure) where namespaces cannot be made, a TCP echo server inside a host
// that reports what reaches it, and dials from one host to another.

package netlab

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/echotest"
)

const (
	// silence is how long a client waits to conclude that nothing comes.
	silence = 300 * time.Millisecond
	// patience bounds the waits for what must come.
	patience = echotest.Patience
)

// need skips t, in one line, where namespaces cannot be made, or fails it
// when the CI environment variable is set.
func need(t *testing.T, why string) {
	t.Helper()
	switch {
	case why == "":
	case os.Getenv("CI") != "":
		t.Fatalf("netlab: %s (CI is set, so this fails instead of skipping)", why)
	default:
		t.Skipf("netlab: %s", why)
	}
}

// newLab returns a Lab with hosts of the given names, closed at the end of
// the test.
func newLab(t *testing.T, names ...string) (*Lab, []*Host) {
	t.Helper()
	need(t, Unavailable())
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	var hosts []*Host
	for _, n := range names {
		h, err := l.AddHost(n)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	return l, hosts
}

// newEcho starts an echo server inside h (internal/echotest), which reports what reaches
// it.
func newEcho(t *testing.T, h *Host) *echotest.Server {
	t.Helper()
	ln, err := h.NS.Listen("tcp4", h.IP.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	return echotest.Serve(t, ln)
}

// dialFrom connects from h to addr within d.
func dialFrom(h *Host, addr string, d time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return h.NS.DialContext(ctx, "tcp4", addr)
}

// roundTrip sends msg on c and reads it back within patience.
func roundTrip(c net.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(patience))
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echoed " + string(buf) + ", want " + msg)
	}
	return nil
}

// silent checks that nothing comes back on c for the silence window, and
// that the read ends with a timeout, not a reset.
func silent(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(silence))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read through the cut: %d bytes, %v; want a timeout", n, err)
	}
}
