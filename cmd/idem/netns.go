//go:build linux

// This file holds the network of "idem chaos -netns" (internal/netlab): each part of the
// run in a network namespace of its own, all joined by a hub namespace that routes between
// them, and the kernel's faults the nemesis (nemesis.go, nemesis_net.go) applies to the
// links between them. The worker processes run inside their namespaces (ip netns exec); the
// fake servers, the round-robin proxy and the link proxies to PostgreSQL or Redis run in
// this process, their sockets made inside the namespaces, so their traffic crosses the hub
// as a real network's would.

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"

	"github.com/idem-go/idem/internal/netlab"
	"github.com/idem-go/idem/testserver"
)

// chaosNet is a run's network.
type chaosNet struct {
	lab     *netlab.Lab
	store   *netlab.Host   // the link proxies to PostgreSQL or Redis listen here
	lb      *netlab.Host   // the round-robin proxy, with 2 servers or more; nil with one
	servers []*netlab.Host // one per fake server
	workers []*netlab.Host // one per worker slot: the fleet's, or the one worker's
	loss    string         // why packet loss is left out; "" if it is not
}

// newChaosNet makes the namespaces for workers worker slots and servers fake servers. It
// fails, saying why, where namespaces cannot be made.
func newChaosNet(workers, servers int) (*chaosNet, error) {
	lab, err := netlab.New()
	if err != nil {
		return nil, fmt.Errorf("-netns: cannot make network namespaces here: %w", err)
	}
	cn := &chaosNet{lab: lab, loss: netlab.LossUnavailable()}
	if cn.loss != "" && os.Getenv("CI") != "" {
		lab.Close()
		return nil, fmt.Errorf("-netns: %s (CI is set: the run must have its packet loss)", cn.loss)
	}
	add := func(name string) *netlab.Host {
		if err != nil {
			return nil
		}
		var h *netlab.Host
		h, err = lab.AddHost(name)
		return h
	}
	cn.store = add("store")
	if servers > 1 {
		cn.lb = add("proxy")
	}
	for i := range servers {
		cn.servers = append(cn.servers, add(fmt.Sprintf("server%d", i+1)))
	}
	for i := range workers {
		cn.workers = append(cn.workers, add(fmt.Sprintf("worker%d", i+1)))
	}
	if err != nil {
		lab.Close()
		return nil, fmt.Errorf("-netns: %w", err)
	}
	return cn, nil
}

// describe says where the parts are, for the run's heading.
func (cn *chaosNet) describe() string {
	d := fmt.Sprintf("each part in a network namespace of its own, joined by a hub that routes 198.18.0.0/15: %s %s",
		cn.store, cn.store.IP)
	if cn.lb != nil {
		d += fmt.Sprintf(", %s %s", cn.lb, cn.lb.IP)
	}
	for _, h := range append(append([]*netlab.Host{}, cn.servers...), cn.workers...) {
		d += fmt.Sprintf(", %s %s", h, h.IP)
	}
	if cn.loss != "" {
		d += "\n  (no packet loss in this run: " + cn.loss + ")"
	}
	return d
}

// Close deletes the namespaces. The worker processes must have ended.
func (cn *chaosNet) Close() error { return cn.lab.Close() }

// listenServer starts fake server i inside its namespace.
func (cn *chaosNet) listenServer(i int, opts *testserver.Options) (*testserver.Server, error) {
	var s *testserver.Server
	err := cn.servers[i].NS.Do(func() error {
		var err error
		s, err = testserver.Listen(net.JoinHostPort(cn.servers[i].IP.String(), "0"), opts)
		return err
	})
	return s, err
}

// proxyListener is where the round-robin proxy listens, in its namespace, and proxyDial
// how it reaches the servers, from there.
func (cn *chaosNet) proxyListener() (net.Listener, error) { return listenHost(cn.lb) }

func (cn *chaosNet) proxyDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return cn.lb.NS.DialContext(ctx, network, addr)
}

// storeLink starts a link proxy in the store's namespace to target, a host:port of the
// root namespace (PostgreSQL or Redis on 127.0.0.1).
func (cn *chaosNet) storeLink(target string) (*storeLink, error) {
	ln, err := listenHost(cn.store)
	if err != nil {
		return nil, err
	}
	return storeLinkOn(ln, target), nil
}

// serverDial is how server i's store client connects: from the server's namespace.
func (cn *chaosNet) serverDial(i int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return cn.servers[i].NS.DialContext
}

// workerCommand returns the command that runs worker slot i's process inside its namespace.
func (cn *chaosNet) workerCommand(ctx context.Context, slot int, exe string, args ...string) *exec.Cmd {
	return cn.workers[slot].NS.CommandContext(ctx, exe, args...)
}

// healAll heals every fault of the kernel's in force.
func (cn *chaosNet) healAll() error { return cn.lab.HealAll() }

func listenHost(h *netlab.Host) (net.Listener, error) {
	return h.NS.Listen("tcp4", net.JoinHostPort(h.IP.String(), "0"))
}

// labFault is a fault of the Lab's, as the nemesis applies it.
type labFault struct {
	lab *netlab.Lab
	f   *netlab.Fault
}

func (l labFault) apply() error   { return l.lab.Apply(l.f) }
func (l labFault) heal() error    { return l.lab.Heal(l.f) }
func (l labFault) String() string { return l.f.String() }

func (l labFault) kind() string {
	switch l.f.Kind {
	case netlab.Partition:
		return "partition both ways"
	case netlab.OneWay:
		return "one-way partition"
	case netlab.Loss:
		return "packet loss"
	}
	return "host cut off"
}
