//go:build linux

// faults.go holds a Lab's faults: a host cut off, partitions between two
// hosts one way or both, and packet loss between two hosts. Each drops
// packets silently, in the kernel: nothing is reset, no ICMP error is sent.

package netlab

import (
	"errors"
	"fmt"
)

// FaultKind is what a Fault does.
type FaultKind int

const (
	// Partition drops every packet between From and To, both ways: an ip
	// rule of type blackhole in the hub for each direction.
	Partition FaultKind = iota
	// OneWay drops From's packets to To, and lets To's to From through: To
	// never hears From, while From hears To. With From a store and To its
	// client, requests reach the store and are acted on, and the replies
	// are lost.
	OneWay
	// Loss drops Percent per cent of the packets between From and To, both
	// ways, at random: an nftables rule (numgen random) in the hub. It needs
	// nft(8) (LossUnavailable).
	Loss
	// Isolate sets the hub's end of From's link down: From reaches no one
	// and no one reaches it. To is not used.
	Isolate
)

// Fault is one fault of a Lab, between two of its hosts.
type Fault struct {
	Kind     FaultKind
	From, To *Host
	Percent  int // Loss only: 1 to 100

	id int // set by Apply
}

// String says what f does, for reports.
func (f *Fault) String() string {
	switch f.Kind {
	case Partition:
		return fmt.Sprintf("partition %s <-> %s", f.From, f.To)
	case OneWay:
		return fmt.Sprintf("one-way partition: %s's packets to %s dropped", f.From, f.To)
	case Loss:
		return fmt.Sprintf("%d%% packet loss %s <-> %s", f.Percent, f.From, f.To)
	case Isolate:
		return fmt.Sprintf("%s cut off", f.From)
	}
	return "fault(?)"
}

// Apply puts f in force. Applying a fault already in force does nothing.
func (l *Lab) Apply(f *Fault) error {
	if err := l.check(f); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("netlab: lab closed")
	}
	if l.faults[f] {
		return nil
	}
	l.ids++
	f.id = l.ids
	var err error
	switch f.Kind {
	case Partition:
		if err = l.rule("add", f, f.From, f.To); err == nil {
			if err = l.rule("add", f, f.To, f.From); err != nil {
				l.rule("del", f, f.From, f.To)
			}
		}
	case OneWay:
		err = l.rule("add", f, f.From, f.To)
	case Loss:
		err = l.nft(fmt.Sprintf(lossTable, f.id, f.From.IP, f.To.IP, f.Percent, f.To.IP, f.From.IP, f.Percent))
	case Isolate:
		err = f.From.link.CutBoth()
	}
	if err == nil {
		l.faults[f] = true
	}
	return err
}

// Heal undoes f. Healing a fault not in force does nothing.
func (l *Lab) Heal(f *Fault) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || !l.faults[f] {
		return nil
	}
	var err error
	switch f.Kind {
	case Partition:
		err = errors.Join(l.rule("del", f, f.From, f.To), l.rule("del", f, f.To, f.From))
	case OneWay:
		err = l.rule("del", f, f.From, f.To)
	case Loss:
		err = run(nil, "ip", "netns", "exec", l.hub.Name, "nft", "delete", "table", "ip", fmt.Sprintf("idemloss%d", f.id))
	case Isolate:
		err = f.From.link.Heal()
	}
	if err == nil {
		delete(l.faults, f)
	}
	return err
}

// HealAll undoes every fault in force.
func (l *Lab) HealAll() error {
	l.mu.Lock()
	var in []*Fault
	for f := range l.faults {
		in = append(in, f)
	}
	l.mu.Unlock()
	var errs []error
	for _, f := range in {
		errs = append(errs, l.Heal(f))
	}
	return errors.Join(errs...)
}

// check refuses a fault that names hosts of another Lab, or none.
func (l *Lab) check(f *Fault) error {
	if f.From == nil || (f.Kind != Isolate && f.To == nil) {
		return errors.New("netlab: a fault needs its hosts")
	}
	if f.Kind == Loss && (f.Percent < 1 || f.Percent > 100) {
		return fmt.Errorf("netlab: packet loss of %d%%: want 1 to 100", f.Percent)
	}
	if f.Kind == Loss {
		if why := LossUnavailable(); why != "" {
			return errors.New("netlab: " + why)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range []*Host{f.From, f.To} {
		if h == nil {
			continue
		}
		found := false
		for _, o := range l.hosts {
			found = found || o == h
		}
		if !found {
			return fmt.Errorf("netlab: host %s is not this lab's", h)
		}
	}
	return nil
}

// rule adds or deletes the hub's rule that drops from's packets to to, with
// a priority of f's own so that one fault's deletion leaves another's rule
// between the same hosts in force.
func (l *Lab) rule(op string, f *Fault, from, to *Host) error {
	return ip(l.hub.args("rule", op, "priority", fmt.Sprint(100+f.id), "from", from.IP.String(), "to", to.IP.String(), "blackhole")...)
}

// lossTable is the nftables table of one Loss fault: its number, then each
// direction's source, destination and per cent.
const lossTable = `table ip idemloss%d {
	chain forward {
		type filter hook forward priority 0; policy accept;
		ip saddr %s ip daddr %s numgen random mod 100 < %d drop
		ip saddr %s ip daddr %s numgen random mod 100 < %d drop
	}
}
`

// nft loads script into the hub's nftables.
func (l *Lab) nft(script string) error {
	return run([]byte(script), "ip", "netns", "exec", l.hub.Name, "nft", "-f", "-")
}
