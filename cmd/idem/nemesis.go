// This file holds the nemesis of "idem chaos": on a schedule drawn from -seed it puts one
// link into a fault, heals it, waits, and goes on with the next, one fault at a time, and
// keeps what each fault did, from the link proxy's counters and the server's ledger, for
// the report (storelink_report.go). A fault is a mode of a link proxy (storelink.go) on a
// server's link to its Redis or PostgreSQL store, or, with -netns, a fault of the kernel's
// between two of the run's network namespaces (nemesis_net.go).

package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idem-go/idem/testserver"
)

// How long each kind of fault lasts, and how long after its heal what it did is still
// counted as its doing. The gap between two faults, 1 to 3 s, is never shorter.
const (
	// resetFor: every reply on the link is lost to a reset for this long.
	resetFor = time.Second
	// holdFor is longer than the Redis client's read timeout (storeReadTimeout) and the
	// servers' lease (testserver.DefaultLease): calls time out, renewals fail.
	holdFor = 2500 * time.Millisecond
	// partitionFor is longer than the lease, so that a holder cut off cannot renew it.
	partitionFor = 3 * time.Second
	afterHeal    = time.Second
)

// linkFault is one fault of the schedule, and what it did once applied.
type linkFault struct {
	kind    linkMode      // what the link proxy does; linkPass if net does the fault
	net     netFault      // a fault of the kernel's (-netns); nil for a link proxy's
	link    int           // the link proxy that does the fault or measures it; -1 for none
	on      string        // the link proxy's name, for the report: "server 1's link to the store"
	server  int           // the server whose ledger measures it; -1 for none
	at, dur time.Duration // planned start, since the run's start, and duration
	err     error         // applying or healing failed

	applied       bool
	began, healed time.Duration // since the run's start
	stats         linkStats     // the link proxy's counters from its start to afterHeal past its heal
	slowest       time.Duration // the longest call through the link proxy, over the same time
	ledger        storeCounts   // the server's, over the same time
	requests      int           // requests the server received, over the same time
	settled       int           // payments that got their final answer, over the same time
	slowestCall   time.Duration // the slowest of their calls, from the worker's start
}

// storeCounts are the ledger counters a store fault moves.
type storeCounts struct {
	unavailable, errors int
}

func ledgerStoreCounts(l testserver.Ledger) storeCounts {
	return storeCounts{l.StoreUnavailable, l.StoreErrors}
}

func (c storeCounts) sub(before storeCounts) storeCounts {
	return storeCounts{c.unavailable - before.unavailable, c.errors - before.errors}
}

// planLinkFaults draws perKind faults of each kind (reset after write, replies held,
// partition) from seed: in rounds of one of each kind in a random order, each on a random
// one of servers, each 1 to 3 s after the last one's heal.
func planLinkFaults(seed uint64, servers, perKind int) []*linkFault {
	rng := rand.New(rand.NewPCG(seed, 0x57011e))
	durations := map[linkMode]time.Duration{linkReset: resetFor, linkHold: holdFor, linkPartition: partitionFor}
	var plan []*linkFault
	var at time.Duration
	for range perKind {
		kinds := []linkMode{linkReset, linkHold, linkPartition}
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, k := range kinds {
			at += time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
			s := rng.IntN(servers)
			f := &linkFault{kind: k, link: s, on: fmt.Sprintf("server %d's link", s+1), server: s, at: at, dur: durations[k]}
			plan = append(plan, f)
			at += f.dur
		}
	}
	return plan
}

// netFault is a fault of the kernel's on a link between two network namespaces.
type netFault interface {
	apply() error
	heal() error
	String() string // what it does, for the report
	kind() string   // its kind, for the report's count: "partition both ways"
}

// nemesis applies a plan of link faults. Its fields are its own until stop returns.
type nemesis struct {
	plan    []*linkFault
	links   []*storeLink
	servers []*testserver.Server
	healAll func() error // heals every netFault; nil without -netns
	clock   *callClock   // the payments' calls; nil for none
	start   time.Time
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// startNemesis applies plan to links (the link proxies its faults' link fields index) and
// to the kernel's links, measuring with servers' ledgers and clock, from start on.
// healAll, if not nil, heals every kernel fault at the end.
func startNemesis(plan []*linkFault, links []*storeLink, servers []*testserver.Server, healAll func() error, clock *callClock, start time.Time) *nemesis {
	n := &nemesis{plan: plan, links: links, servers: servers, healAll: healAll, clock: clock, start: start,
		quit: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

func (n *nemesis) run() {
	defer close(n.done)
	for _, f := range n.plan {
		if !n.sleepUntil(f.at) {
			return
		}
		n.apply(f)
		ok := n.sleepUntil(f.began + f.dur)
		n.heal(f)
		if ok {
			ok = n.sleepUntil(f.healed + afterHeal)
		}
		if f.link >= 0 {
			f.stats = n.links[f.link].Stats().sub(f.stats)
			f.slowest = n.links[f.link].takeSlowest()
		}
		if f.server >= 0 {
			f.ledger = ledgerStoreCounts(n.servers[f.server].Ledger()).sub(f.ledger)
			f.requests = n.servers[f.server].Ledger().Requests - f.requests
		}
		f.settled, f.slowestCall = n.clock.take()
		if !ok {
			return
		}
	}
}

// apply starts f, keeping the counters it starts from.
func (n *nemesis) apply(f *linkFault) {
	if f.link >= 0 {
		f.stats = n.links[f.link].Stats()
		n.links[f.link].takeSlowest()
	}
	if f.server >= 0 {
		l := n.servers[f.server].Ledger()
		f.ledger, f.requests = ledgerStoreCounts(l), l.Requests
	}
	n.clock.take()
	f.applied = true
	f.began = time.Since(n.start)
	if f.net != nil {
		f.err = f.net.apply()
	} else {
		n.links[f.link].setMode(f.kind)
	}
	fmt.Printf("  %s for %v, after %.1fs\n", f.what(), f.dur, f.began.Seconds())
	if f.err != nil {
		fmt.Printf("  the fault failed: %v\n", f.err)
	}
}

// heal ends f.
func (n *nemesis) heal(f *linkFault) {
	if f.net != nil {
		f.err = errors.Join(f.err, f.net.heal())
	} else {
		n.links[f.link].setMode(linkPass)
	}
	f.healed = time.Since(n.start)
}

// kindName is f's kind, for the report's count of what was healed.
func (f *linkFault) kindName() string {
	if f.net != nil {
		return f.net.kind()
	}
	return f.kind.String()
}

// what names f and its link.
func (f *linkFault) what() string {
	if f.net != nil {
		return f.net.String()
	}
	return fmt.Sprintf("%s on %s", f.kind, f.on)
}

// sleepUntil waits until d after the start, and reports false if stopped first.
func (n *nemesis) sleepUntil(d time.Duration) bool {
	t := time.NewTimer(time.Until(n.start.Add(d)))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.quit:
		return false
	}
}

// stop ends the schedule and heals every link (the final heal). A fault cut short counts
// what it did until then. Calling stop again does nothing.
func (n *nemesis) stop() {
	n.once.Do(func() {
		close(n.quit)
		<-n.done
		for _, l := range n.links {
			l.setMode(linkPass)
		}
		if n.healAll != nil {
			if err := n.healAll(); err != nil {
				fmt.Printf("  the final heal failed: %v\n", err)
			}
		}
	})
}
