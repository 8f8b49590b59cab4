//go:build linux

// namespace.go makes and deletes the network namespaces, runs code and
// starts processes inside one, and sweeps what dead processes left.

package netlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// NSPrefix starts the name of every namespace this package makes:
	// NSPrefix<pid>-<n>, so that a namespace left by a process that died
	// can be told from one in use.
	NSPrefix = "idemnf-"
	// DevPrefix starts the name of both ends of a veth pair made in the
	// root namespace: the root end's followed by <block>r, the other by
	// <block>n (pair.go).
	DevPrefix = "idemnf"
	// NSDir is where ip(8) names network namespaces.
	NSDir = "/run/netns"
)

// seq numbers the namespaces of this process.
var seq atomic.Int64

// Namespace is a named network namespace. A nil *Namespace is the root
// namespace, where it makes sense (Pair's outer end).
type Namespace struct {
	Name string
}

// NextName returns the name the next NewNamespace of this process will use.
func NextName() string {
	return fmt.Sprintf("%s%d-%d", NSPrefix, os.Getpid(), seq.Load()+1)
}

// NewNamespace makes a namespace with its loopback up. One of the same name
// can only have been left by an earlier process with this process's pid (the
// name's number is this process's own), so it is deleted and made again.
func NewNamespace() (*Namespace, error) {
	n := &Namespace{Name: fmt.Sprintf("%s%d-%d", NSPrefix, os.Getpid(), seq.Add(1))}
	err := ip("netns", "add", n.Name)
	if err != nil {
		if _, serr := os.Stat(n.path()); serr != nil {
			return nil, err
		}
		if err := ip("netns", "del", n.Name); err != nil {
			return nil, err
		}
		if err = ip("netns", "add", n.Name); err != nil {
			return nil, err
		}
	}
	if err := ip("-n", n.Name, "link", "set", "lo", "up"); err != nil {
		n.Delete()
		return nil, err
	}
	return n, nil
}

func (n *Namespace) path() string { return filepath.Join(NSDir, n.Name) }

// args prefixes an ip(8) command with -n Name, or nothing for the root.
func (n *Namespace) args(args ...string) []string {
	if n == nil {
		return args
	}
	return append([]string{"-n", n.Name}, args...)
}

// Delete deletes the namespace's name. The namespace itself, and its
// devices, go when nothing else holds it: a socket made in it, or a process
// running in it.
func (n *Namespace) Delete() error {
	return ip("netns", "del", n.Name)
}

// Do runs f on an OS thread moved into the namespace, and returns its error.
// Sockets f makes stay in the namespace for their whole life, wherever they
// are used from later. The thread is locked and never unlocked: when f
// returns, the runtime ends the thread instead of running other goroutines
// in the namespace.
func (n *Namespace) Do(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(n.path(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("netlab: open %s: %w", n.path(), err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			done <- fmt.Errorf("netlab: setns %s: %w", n.path(), err)
			return
		}
		done <- f()
	}()
	return <-done
}

// DialContext connects to addr from inside the namespace; it honours ctx's
// deadline and cancellation. It has the signature of go-redis's
// Options.Dialer and pgconn's Config.DialFunc. addr should be an IP address:
// a host name is looked up from the root namespace.
func (n *Namespace) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		// A negative FallbackDelay keeps every connect on this goroutine:
		// the fast fallback between address families would dial on others.
		d := net.Dialer{FallbackDelay: -1}
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on addr inside the namespace.
func (n *Namespace) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := n.Do(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// CommandContext returns a command that runs name with args inside the
// namespace, through ip netns exec, which execs it in place: the command's
// process is name's own, so a signal sent to it reaches name.
func (n *Namespace) CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Sweep deletes the namespaces, and the veth pairs in the root namespace,
// that this package made in processes that no longer run: a test binary
// killed by go test's -timeout, or a chaos run killed by SIGKILL, runs no
// cleanup. It is best effort, and another process may be sweeping the same
// namespace, so it reports nothing.
func Sweep() {
	entries, err := os.ReadDir(NSDir)
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

// namespaceEnds returns the names of the veth ends of root pairs in
// namespace ns.
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
		if strings.HasPrefix(l.Name, DevPrefix) {
			ends = append(ends, l.Name)
		}
	}
	return ends
}

// namespacePID returns the pid in a name NSPrefix<pid>-<n>.
func namespacePID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, NSPrefix)
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
