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
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// range15 is 198.18.0.0/15, which every link's addresses must be in.
var range15 = netip.MustParsePrefix("198.18.0.0/15")

func TestLinkCarriesConnections(t *testing.T) {
	t.Parallel()
	s := newEcho(t)
	l := newLink(t, s.addr)
	l.Heal() // nothing is cut: nothing to do
	ap := netip.MustParseAddrPort(l.Addr())
	if !range15.Contains(ap.Addr()) || ap.Addr() != l.rootIP {
		t.Fatalf("Addr() = %s, want the root end %s, in %s", ap, l.rootIP, range15)
	}
	c := dial(t, l)
	if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); got != l.nsIP {
		t.Fatalf("the connection's local address is %s, want the namespace end %s", got, l.nsIP)
	}
	send(t, c, "hello")
	s.received(t, "hello")
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
			l := newLink(t, s.addr)
			if tc.rpFilter {
				if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+l.rootDev+"/rp_filter", []byte("1"), 0); err != nil {
					t.Fatal(err)
				}
			}
			c := dial(t, l)
			send(t, c, "before")
			s.received(t, "before")
			echoed(t, c, "before")

			tc.cut(l)
			tc.cut(l) // idempotent
			send(t, c, "during")
			silent(t, c)
			if tc.reaches {
				s.received(t, "during")
			} else {
				s.receivedNothing(t)
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
				s.received(t, "during")
			}
			echoed(t, c, "during")
			c2 := dial(t, l)
			send(t, c2, "after")
			s.received(t, "after")
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
			l := newLink(t, s.addr)
			c := dial(t, l)
			send(t, c, l.rootIP.String())
			s.received(t, l.rootIP.String())
			echoed(t, c, l.rootIP.String())
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
		l = New(t, s.addr)
		c := dial(t, l)
		send(t, c, "x")
		s.received(t, "x")
		l.CutReplies()
		l.CutOutward()
		l.CutBoth()
	})
	if l == nil || l.rootDev == "" {
		t.Fatal("no link was made")
	}
	gone(t, l)
}

// TestStaleNamespace leaves a namespace under the name New will use next,
// as a crashed earlier process with this pid would have: New replaces it.
// It does not run in parallel, so that no other New takes that name.
func TestStaleNamespace(t *testing.T) {
	s := newEcho(t)
	name := fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), links.Load()+1)
	require(t)
	if err := ip("netns", "add", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	l := newLink(t, s.addr)
	if l.ns != name {
		t.Fatalf("New named its namespace %s, want %s", l.ns, name)
	}
	c := dial(t, l)
	send(t, c, "x")
	echoed(t, c, "x")
}

// TestSweep leaves a namespace and a veth pair named for a process that has
// ended, the namespace kept alive as the dead process's orphaned connections
// would keep it: New deletes both.
func TestSweep(t *testing.T) {
	require(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s%d-1", nsPrefix, dead.Process.Pid)
	// The leftover is built under a name no sweep takes, then given the
	// dead process's name at once, as ip(8) names one (a bind mount): test
	// binaries running at the same time sweep it as soon as it has that
	// name. Its devices' names are this process's own.
	build := fmt.Sprintf("%ssweep-%d", nsPrefix, os.Getpid())
	root := fmt.Sprintf("%ss%dr", devPrefix, os.Getpid())
	t.Cleanup(func() {
		for _, args := range [][]string{{"link", "del", root}, {"netns", "del", build}, {"netns", "del", name}} {
			exec.Command("ip", args...).Run()
		}
	})
	if err := ip("netns", "add", build); err != nil {
		t.Fatal(err)
	}
	if err := ip("link", "add", root, "type", "veth", "peer", "name", strings.TrimSuffix(root, "r")+"n", "netns", build); err != nil {
		t.Fatal(err)
	}
	hold, err := os.Open(nsDir + "/" + build)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if err := os.WriteFile(nsDir+"/"+name, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(nsDir+"/"+build, nsDir+"/"+name, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := ip("netns", "del", build); err != nil {
		t.Fatal(err)
	}

	newLink(t, newEcho(t).addr)
	if _, err := os.Stat(nsDir + "/" + name); err == nil {
		t.Errorf("New left namespace %s, whose process has ended", name)
	}
	if _, err := net.InterfaceByName(root); err == nil {
		t.Errorf("New left interface %s, in a namespace whose process has ended", root)
	}
}
