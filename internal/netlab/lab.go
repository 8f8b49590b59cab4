//go:build linux

// lab.go holds the Lab: a private network of host namespaces around one hub
// namespace that routes between them. faults.go cuts it.

package netlab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
)

// labRange is what every host routes to the hub: the whole test range, and
// nothing outside it.
const labRange = "198.18.0.0/15"

// Lab is a hub namespace with forwarding on, and host namespaces joined to
// it each by a veth pair of its own, on the n-th /30 of 198.18.0.0/15 for the
// n-th host. Each host routes 198.18.0.0/15, and nothing else, to the hub.
// The root namespace is left as it was: no address, route or forwarding of
// the Lab's is in it, so Labs of several processes can use the same
// addresses side by side. Its methods are safe for concurrent use.
type Lab struct {
	hub *Namespace

	mu     sync.Mutex
	hosts  []*Host
	faults map[*Fault]bool // in force
	ids    int
	closed bool
}

// Host is one namespace of a Lab.
type Host struct {
	// Name is what the caller called it, for reports.
	Name string
	// NS is its namespace: make sockets in it with NS.Listen, NS.DialContext
	// or NS.Do, start processes in it with NS.CommandContext.
	NS *Namespace
	// IP is its address, which every other host of the Lab reaches.
	IP   netip.Addr
	link *Pair // to the hub; the outer end is the hub's
}

func (h *Host) String() string { return h.Name }

// New makes a Lab's hub. It fails, saying why in one line, where namespaces
// cannot be made (Unavailable). It sweeps what dead processes left first.
// The caller must call Close, also on failure and on a signal.
func New() (*Lab, error) {
	if why := Unavailable(); why != "" {
		return nil, errors.New("netlab: " + why)
	}
	Sweep()
	hub, err := NewNamespace()
	if err != nil {
		return nil, err
	}
	l := &Lab{hub: hub, faults: map[*Fault]bool{}}
	// The hub forwards between hosts. Reverse path filtering is off so that
	// a rule dropping one direction (faults.go) does not drop the other.
	err = hub.Do(func() error {
		for _, f := range []string{"ipv4/ip_forward", "ipv4/conf/all/rp_filter", "ipv4/conf/default/rp_filter"} {
			v := "0"
			if f == "ipv4/ip_forward" {
				v = "1"
			}
			if err := os.WriteFile(filepath.Join("/proc/sys/net", f), []byte(v), 0); err != nil {
				return fmt.Errorf("netlab: hub %s: %w", f, err)
			}
		}
		return nil
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// AddHost makes a host namespace, named name in reports, and joins it to the
// hub.
func (l *Lab) AddHost(name string) (*Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("netlab: lab closed")
	}
	ns, err := NewNamespace()
	if err != nil {
		return nil, err
	}
	n := len(l.hosts) + 1
	link, err := newPair(l.hub, ns, fmt.Sprintf("h%d", n), "lab0", n)
	if err == nil {
		err = ip(ns.args("route", "add", labRange, "via", link.OuterIP.String())...)
	}
	if err != nil {
		ns.Delete()
		return nil, err
	}
	h := &Host{Name: name, NS: ns, IP: link.InnerIP, link: link}
	l.hosts = append(l.hosts, h)
	return h, nil
}

// Hosts returns the Lab's hosts, in the order they were added.
func (l *Lab) Hosts() []*Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Host(nil), l.hosts...)
}

// Close deletes the hub, which takes every veth pair, rule and packet filter
// of the Lab with it, then the hosts. Processes still running in a host
// keep its namespace alive, cut off from everything: stop them first.
// Calling Close again does nothing.
func (l *Lab) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, h := range l.hosts {
		// Deleting the pair first cuts a host that a socket keeps alive.
		if err := h.link.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := l.hub.Delete(); err != nil {
		errs = append(errs, err)
	}
	for _, h := range l.hosts {
		if err := h.NS.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	clear(l.faults)
	return errors.Join(errs...)
}
