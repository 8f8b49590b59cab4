//go:build linux

// netfault_test.go checks each fault against an echo server on loopback:
// what reaches the server during the cut, what the client sees, that a new
// connect fails as the package doc says, and that both the old connection
// and a new one work after Heal; then that links do not collide and leave
// nothing behind.

package netfault

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"
)

// range15 is 198.18.0.0/15, which every link's addresses must be in.
var range15 = netip.MustParsePrefix("198.18.0.0/15")

func TestLinkCarriesConnections(t *testing.T) {
	t.Parallel()
	s := newEcho(t)
	l := newLink(t, s.Addr)
	l.Heal() // nothing is cut: nothing to do
	ap := netip.MustParseAddrPort(l.Addr())
	if !range15.Contains(ap.Addr()) || ap.Addr() != l.pair.OuterIP {
		t.Fatalf("Addr() = %s, want the root end %s, in %s", ap, l.pair.OuterIP, range15)
	}
	c := dial(t, l)
	if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); got != l.pair.InnerIP {
		t.Fatalf("the connection's local address is %s, want the namespace end %s", got, l.pair.InnerIP)
	}
	send(t, c, "hello")
	s.Received(t, "hello")
	echoed(t, c, "hello")
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cut      func(*Link)
		rpFilter bool // turn strict reverse path filtering on for the root end
		reaches  bool // what is sent during the cut reaches the server
		refused  bool // a new connect fails at once instead of waiting for its deadline
	}{
		{name: "CutBoth", cut: (*Link).CutBoth},
		{name: "CutOutward", cut: (*Link).CutOutward, refused: true},
		{name: "CutReplies", cut: (*Link).CutReplies, reaches: true},
		{name: "CutReplies_rp_filter", cut: (*Link).CutReplies, rpFilter: true, reaches: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newEcho(t)
			l := newLink(t, s.Addr)
			if tc.rpFilter {
				if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+l.pair.OuterDev+"/rp_filter", []byte("1"), 0); err != nil {
					t.Fatal(err)
				}
			}
			c := dial(t, l)
			send(t, c, "before")
			s.Received(t, "before")
			echoed(t, c, "before")

			tc.cut(l)
			tc.cut(l) // idempotent
			send(t, c, "during")
			silent(t, c)
			if tc.reaches {
				s.Received(t, "during")
			} else {
				s.ReceivedNothing(t)
			}
			took, err := dialWithin(l, silence)
			switch {
			case tc.refused && !errors.Is(err, syscall.EINVAL):
				t.Fatalf("a new connect during the cut: %v after %v, want EINVAL", err, took)
			case tc.refused && took >= silence:
				t.Fatalf("a new connect during the cut failed after %v, want at once", took)
			case !tc.refused && !timeout(err):
				t.Fatalf("a new connect during the cut: %v after %v, want a timeout", err, took)
			case !tc.refused && (took < silence || took > silence+time.Second):
				t.Fatalf("a new connect with a deadline of %v ended after %v", silence, took)
			}

			l.Heal()
			l.Heal() // idempotent
			// Nothing was reset: the established connection resumes when
			// the kernel retransmits.
			if !tc.reaches {
				s.Received(t, "during")
			}
			echoed(t, c, "during")
			c2 := dial(t, l)
			send(t, c2, "after")
			s.Received(t, "after")
			echoed(t, c2, "after")
		})
	}
}

// TestParallelLinks makes links at once, each on its own /30.
func TestParallelLinks(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			s := newEcho(t)
			l := newLink(t, s.Addr)
			c := dial(t, l)
			send(t, c, l.pair.OuterIP.String())
			s.Received(t, l.pair.OuterIP.String())
			echoed(t, c, l.pair.OuterIP.String())
		})
	}
}

// TestTeardown checks that a link's cleanup leaves nothing behind, with
// every fault in force and a connection open.
func TestTeardown(t *testing.T) {
	t.Parallel()
	s := newEcho(t)
	var l *Link
	t.Run("link", func(t *testing.T) {
		l = New(t, s.Addr)
		c := dial(t, l)
		send(t, c, "x")
		s.Received(t, "x")
		l.CutReplies()
		l.CutOutward()
		l.CutBoth()
	})
	if l == nil || l.pair.OuterDev == "" {
		t.Fatal("no link was made")
	}
	gone(t, l)
}
