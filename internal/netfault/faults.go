//go:build linux

// faults.go holds the cuts a Link applies to itself (CutBoth, CutOutward,
// CutReplies) and Heal, which undoes them; netfault.go makes and tears down
// the link. The cuts themselves are netlab.Pair's.

package netfault

// CutBoth sets the root end of the link down: nothing crosses the link
// either way, and nothing is reset. It does nothing if the link is already
// cut that way.
func (l *Link) CutBoth() {
	l.tb.Helper()
	l.do(l.pair.CutBoth)
}

// CutOutward drops the namespace's packets to the root end, with a
// blackhole route inside the namespace: requests never reach the service,
// and a new connect fails at once. It does nothing if already cut that way.
func (l *Link) CutOutward() {
	l.tb.Helper()
	l.do(l.pair.CutOutward)
}

// CutReplies drops the root end's packets to the namespace, by sending them
// to a MAC address no one has: requests reach the service and are applied,
// and their replies are lost. Unlike a blackhole route in the root
// namespace, this does not also drop the requests where reverse path
// filtering (rp_filter) is on. It does nothing if already cut that way.
func (l *Link) CutReplies() {
	l.tb.Helper()
	l.do(l.pair.CutReplies)
}

// Heal undoes every cut in force. A connection established before a cut
// resumes when the kernel next retransmits on it; clients that gave up on
// theirs dial new ones.
func (l *Link) Heal() {
	l.tb.Helper()
	l.do(l.pair.Heal)
}

func (l *Link) do(f func() error) {
	l.tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := f(); err != nil {
		l.tb.Fatalf("netfault: %v", err)
	}
}
