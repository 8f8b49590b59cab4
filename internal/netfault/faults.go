//go:build linux

// faults.go holds the cuts a Link applies to itself (CutBoth, CutOutward,
// CutReplies) and Heal, which undoes them; netfault.go makes and tears down the
// link, dial.go carries the connections across it.

package netfault

import "errors"

// nowhere is the MAC address CutReplies sends the namespace's packets to:
// locally administered, unicast, and not the namespace end's.
const nowhere = "02:00:00:de:ad:00"

// CutBoth sets the root end of the link down: nothing crosses the link
// either way, and nothing is reset. It does nothing if the link is already
// cut that way.
func (l *Link) CutBoth() {
	l.tb.Helper()
	l.cut(&l.down, "link", "set", l.rootDev, "down")
}

// CutOutward drops the namespace's packets to the root end, with a
// blackhole route inside the namespace: requests never reach the service,
// and a new connect fails at once. It does nothing if already cut that way.
func (l *Link) CutOutward() {
	l.tb.Helper()
	l.cut(&l.outward, "-n", l.ns, "route", "add", "blackhole", l.rootIP.String()+"/32")
}

// CutReplies drops the root end's packets to the namespace, by sending them
// to a MAC address no one has: requests reach the service and are applied,
// and their replies are lost. Unlike a blackhole route in the root
// namespace, this does not also drop the requests where reverse path
// filtering (rp_filter) is on. It does nothing if already cut that way.
func (l *Link) CutReplies() {
	l.tb.Helper()
	l.cut(&l.replies, "neigh", "replace", l.nsIP.String(), "lladdr", nowhere, "nud", "permanent", "dev", l.rootDev)
}

// Heal undoes every cut in force. A connection established before a cut
// resumes when the kernel next retransmits on it; clients that gave up on
// theirs dial new ones.
func (l *Link) Heal() {
	l.tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.heal(); err != nil {
		l.tb.Fatalf("netfault: %v", err)
	}
}

func (l *Link) cut(state *bool, args ...string) {
	l.tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if *state {
		return
	}
	if err := ip(args...); err != nil {
		l.tb.Fatalf("netfault: %v", err)
	}
	*state = true
}

func (l *Link) heal() error {
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
	undo(&l.down, "link", "set", l.rootDev, "up")
	undo(&l.outward, "-n", l.ns, "route", "del", "blackhole", l.rootIP.String()+"/32")
	undo(&l.replies, "neigh", "del", l.nsIP.String(), "dev", l.rootDev)
	return errors.Join(errs...)
}
