//go:build linux

// pair.go makes a veth pair between two namespaces, each end with its
// address in one /30, and cuts it three ways: both ways (the outer end
// down), outward (a blackhole route in the inner namespace), replies (the
// outer namespace's neighbour entry for the inner end pointed at a MAC
// address no one has).

package netlab

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"time"
)

const (
	// blocks is the number of /30 blocks in 198.18.0.0/15. The first one,
	// 198.18.0.0/30, is left to setups made by hand.
	blocks = 1 << 15
	// probes is how many blocks NewRootPair tries before giving up.
	probes = 8
	// nowhere is the MAC address CutReplies sends the outer end's packets
	// to: locally administered, unicast, and no end's.
	nowhere = "02:00:00:de:ad:00"
	// upWithin bounds the wait for a new pair to be up.
	upWithin = 5 * time.Second
)

// base is the first address of 198.18.0.0/15.
var base = netip.AddrFrom4([4]byte{198, 18, 0, 0})

// Pair is a veth pair: its outer end in Outer (nil for the root namespace),
// its inner end in Inner. Its methods are safe for concurrent use.
type Pair struct {
	Outer, Inner       *Namespace
	OuterDev, InnerDev string
	OuterIP, InnerIP   netip.Addr

	mu      sync.Mutex
	down    bool // CutBoth
	outward bool // CutOutward
	replies bool // CutReplies
}

// NewRootPair joins inner to the root namespace by a veth pair on a /30 of
// 198.18.0.0/15 picked at random. The root end's name, which holds the
// block, is made atomically by the kernel: if another pair (of this or
// another process) holds it, making it fails and the next block is tried. A
// block whose addresses are on an interface of the root namespace already
// is passed over. Delete, or deleting inner, removes it.
func NewRootPair(inner *Namespace) (*Pair, error) {
	start := 1 + rand.IntN(blocks-1)
	var err error
	for i := range probes {
		n := 1 + (start-1+i)%(blocks-1)
		outer, peer := block(n)
		if inUse(outer) {
			continue
		}
		p := &Pair{Inner: inner, OuterDev: fmt.Sprintf("%s%dr", DevPrefix, n), InnerDev: fmt.Sprintf("%s%dn", DevPrefix, n),
			OuterIP: outer, InnerIP: peer}
		if err = ip("link", "add", p.OuterDev, "type", "veth", "peer", "name", p.InnerDev, "netns", inner.Name); err != nil {
			continue
		}
		if err = p.up(); err != nil {
			p.Delete()
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("netlab: no free /30 in 198.18.0.0/15 after %d tries (last: %v)", probes, err)
}

// newPair joins inner to outer (not the root namespace) by a veth pair with
// the given names and the n-th /30 of 198.18.0.0/15: names and addresses
// only need to be unique in those two namespaces.
func newPair(outer, inner *Namespace, outerDev, innerDev string, n int) (*Pair, error) {
	o, i := block(n)
	p := &Pair{Outer: outer, Inner: inner, OuterDev: outerDev, InnerDev: innerDev, OuterIP: o, InnerIP: i}
	if err := ip(outer.args("link", "add", outerDev, "type", "veth", "peer", "name", innerDev, "netns", inner.Name)...); err != nil {
		return nil, err
	}
	if err := p.up(); err != nil {
		p.Delete()
		return nil, err
	}
	return p, nil
}

// up gives both ends their addresses, brings them up, and waits until the kernel has them
// operationally up.
func (p *Pair) up() error {
	for _, args := range [][]string{
		p.Outer.args("addr", "add", p.OuterIP.String()+"/30", "dev", p.OuterDev),
		p.Outer.args("link", "set", p.OuterDev, "up"),
		p.Inner.args("addr", "add", p.InnerIP.String()+"/30", "dev", p.InnerDev),
		p.Inner.args("link", "set", p.InnerDev, "up"),
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return p.waitUp()
}

// waitUp waits, up to upWithin, until both ends are operationally up. The kernel attaches
// a device's queue when it sees its carrier come on, a moment after the link is set up
// (linkwatch, a work queue that a busy machine runs late); until then what is sent is
// dropped, and a connect waits a second for its retransmission.
func (p *Pair) waitUp() error {
	deadline := time.Now().Add(upWithin)
	for {
		outer, err := operUp(p.Outer, p.OuterDev)
		if err != nil {
			return err
		}
		inner, err := operUp(p.Inner, p.InnerDev)
		if err != nil {
			return err
		}
		if outer && inner {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netlab: veth pair %s/%s not up after %v", p.OuterDev, p.InnerDev, upWithin)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// operUp reports whether dev, in ns, is operationally up.
func operUp(ns *Namespace, dev string) (bool, error) {
	args := ns.args("-j", "link", "show", "dev", dev)
	out, err := exec.Command("ip", args...).Output()
	if err != nil {
		return false, fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	var links []struct {
		State string `json:"operstate"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return false, fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	return len(links) == 1 && links[0].State == "UP", nil
}

// block returns the outer end's and the inner end's addresses in the n-th
// /30 of 198.18.0.0/15.
func block(n int) (outer, inner netip.Addr) {
	b := base.As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(n)*4
	a := netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, v)))
	return a.Next(), a.Next().Next()
}

// inUse reports whether an interface of the root namespace has an address
// in the /30 of a: a hand-made setup that NewRootPair must not collide with.
func inUse(a netip.Addr) bool {
	p := netip.PrefixFrom(a, 30).Masked()
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

// Delete deletes the pair; both ends, their addresses, routes and neighbour
// entries go with it, even while a socket still keeps a namespace alive.
func (p *Pair) Delete() error {
	return ip(p.Outer.args("link", "del", p.OuterDev)...)
}

// CutBoth sets the outer end down: nothing crosses the pair either way, and
// nothing is reset. It does nothing if the pair is already cut that way.
func (p *Pair) CutBoth() error {
	return p.cut(&p.down, p.Outer.args("link", "set", p.OuterDev, "down")...)
}

// CutOutward drops the inner namespace's packets to the outer end, with a
// blackhole route in the inner namespace: requests never reach the outer
// side, and a new connect fails at once with EINVAL. It does nothing if
// already cut that way.
func (p *Pair) CutOutward() error {
	return p.cut(&p.outward, p.Inner.args("route", "add", "blackhole", p.OuterIP.String()+"/32")...)
}

// CutReplies drops the outer end's packets to the inner namespace, by
// sending them to a MAC address no one has: requests reach the outer side
// and are acted on, and their replies are lost. Unlike a blackhole route,
// this does not also drop the requests where reverse path filtering
// (rp_filter) is on. It does nothing if already cut that way.
func (p *Pair) CutReplies() error {
	return p.cut(&p.replies, p.Outer.args("neigh", "replace", p.InnerIP.String(), "lladdr", nowhere, "nud", "permanent", "dev", p.OuterDev)...)
}

// Heal undoes every cut in force. A connection established before a cut
// resumes when the kernel next retransmits on it.
func (p *Pair) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	undo := func(state *bool, args ...string) {
		if !*state {
			return
		}
		if err := ip(args...); err != nil {
			errs = append(errs, err)
			return
		}
		*state = false
	}
	undo(&p.down, p.Outer.args("link", "set", p.OuterDev, "up")...)
	undo(&p.outward, p.Inner.args("route", "del", "blackhole", p.OuterIP.String()+"/32")...)
	undo(&p.replies, p.Outer.args("neigh", "del", p.InnerIP.String(), "dev", p.OuterDev)...)
	return errors.Join(errs...)
}

func (p *Pair) cut(state *bool, args ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if *state {
		return nil
	}
	if err := ip(args...); err != nil {
		return err
	}
	*state = true
	return nil
}
