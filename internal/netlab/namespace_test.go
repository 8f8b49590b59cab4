//go:build linux

// namespace_test.go checks that a namespace left under the name a new one
// takes is replaced, and that Sweep deletes what dead processes left.

package netlab

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStaleNamespace leaves a namespace under the name NewNamespace will use
// next, as a crashed earlier process with this pid would have: NewNamespace
// replaces it. It does not run in parallel, so that nothing else takes that
// name.
func TestStaleNamespace(t *testing.T) {
	need(t, Unavailable())
	name := NextName()
	if err := ip("netns", "add", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	n, err := NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != name {
		t.Fatalf("NewNamespace named its namespace %s, want %s", n.Name, name)
	}
	if err := n.Delete(); err != nil {
		t.Fatal(err)
	}
}

// TestSweep leaves a namespace and a veth pair named for a process that has
// ended, the namespace kept alive as the dead process's orphaned connections
// would keep it: Sweep deletes both.
func TestSweep(t *testing.T) {
	need(t, Unavailable())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s%d-1", NSPrefix, dead.Process.Pid)
	// The leftover is built under a name no sweep takes, then given the
	// dead process's name at once, as ip(8) names one (a bind mount): test
	// binaries running at the same time sweep it as soon as it has that
	// name. Its devices' names are this process's own.
	build := fmt.Sprintf("%ssweep-%d", NSPrefix, os.Getpid())
	root := fmt.Sprintf("%ss%dr", DevPrefix, os.Getpid())
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
	hold, err := os.Open(NSDir + "/" + build)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if err := os.WriteFile(NSDir+"/"+name, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(NSDir+"/"+build, NSDir+"/"+name, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := ip("netns", "del", build); err != nil {
		t.Fatal(err)
	}

	Sweep()
	if _, err := os.Stat(NSDir + "/" + name); err == nil {
		t.Errorf("Sweep left namespace %s, whose process has ended", name)
	}
	if _, err := net.InterfaceByName(root); err == nil {
		t.Errorf("Sweep left interface %s, in a namespace whose process has ended", root)
	}
}
