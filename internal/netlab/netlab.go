//go:build linux

// Package netlab makes real network faults for this repository's tests and
// for "idem chaos -netns": network namespaces joined by veth pairs, addresses
// from 198.18.0.0/15 (the range RFC 2544 and RFC 6890 set aside for network
// tests), and cuts the kernel makes, so a process sees silence, never an
// error a proxy made up. It returns errors rather than failing a test:
// internal/netfault is the testing.TB layer over it.
//
// Two shapes are built here:
//
//   - A Pair (pair.go) joins one namespace to the root namespace, where
//     PostgreSQL and Redis listen on 127.0.0.1, with a Forwarder
//     (forward.go) on the root end: what internal/netfault's Link is.
//   - A Lab (lab.go) is a private network: one hub namespace that routes
//     between host namespaces, each joined to it by a veth pair. Nothing of
//     a Lab is in the root namespace: no address, no route, no forwarding.
//     A service on 127.0.0.1 is reached through a proxy whose listener is
//     made in a host namespace (Namespace.Listen) and whose connections to
//     the service are made from the root namespace, as any goroutine's
//     are. Its faults (faults.go) are partitions one way or both between
//     any two hosts, a host cut off, and packet loss (nftables). The kernel
//     here has no netem, so a slow link is a delay in such a proxy.
//
// Everything needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and ip(8);
// Unavailable says why it cannot run. Namespaces are named
// idemnf-<pid>-<n>, so Sweep can delete what a process that died left.
package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Unavailable says, in one line, why namespaces cannot be made here, or
// returns "" when they can.
func Unavailable() string {
	const need = 1<<12 | 1<<21 // CAP_NET_ADMIN, CAP_SYS_ADMIN
	if caps, err := effectiveCaps(); err != nil || caps&need != need {
		return "needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to make network namespaces"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "needs ip(8) from iproute2 in PATH"
	}
	return ""
}

// LossUnavailable says, in one line, why packet loss (nftables) cannot be
// made here, or returns "" when it can.
func LossUnavailable() string {
	if _, err := exec.LookPath("nft"); err != nil {
		return "packet loss needs nft(8) (apt-get install nftables)"
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
	return run(nil, "ip", args...)
}

// run runs name with args, stdin from in if not nil; its error includes the
// command and its output.
func run(in []byte, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
