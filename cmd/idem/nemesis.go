// This file holds the nemesis of "idem chaos" on servers that share a Redis or PostgreSQL
// store: on a schedule drawn from -seed it puts one server's link to the store
// (storelink.go) into a fault, heals it, waits, and goes on with the next, one link at a
// time, and keeps what each fault did, from the link's counters and the server's ledger,
// for the report (storelink_report.go).

package main

import (
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
	kind    linkMode
	server  int           // index into the cluster's servers and links
	at, dur time.Duration // planned start, since the run's start, and duration

	applied       bool
	began, healed time.Duration // since the run's start
	link          linkStats     // the link's counters from its start to afterHeal past its heal
	slowest       time.Duration // the longest store call through the link, over the same time
	ledger        storeCounts   // the server's, over the same time
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
			f := &linkFault{kind: k, server: rng.IntN(servers), at: at, dur: durations[k]}
			plan = append(plan, f)
			at += f.dur
		}
	}
	return plan
}

// nemesis applies a plan of link faults. Its fields are its own until stop returns.
type nemesis struct {
	plan    []*linkFault
	links   []*storeLink
	servers []*testserver.Server
	start   time.Time
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// startNemesis applies plan to links, the store links of servers, from start on.
func startNemesis(plan []*linkFault, links []*storeLink, servers []*testserver.Server, start time.Time) *nemesis {
	n := &nemesis{plan: plan, links: links, servers: servers, start: start,
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
		n.links[f.server].setMode(linkPass)
		f.healed = time.Since(n.start)
		if ok {
			ok = n.sleepUntil(f.healed + afterHeal)
		}
		f.link = n.links[f.server].Stats().sub(f.link)
		f.slowest = n.links[f.server].takeSlowest()
		f.ledger = ledgerStoreCounts(n.servers[f.server].Ledger()).sub(f.ledger)
		if !ok {
			return
		}
	}
}

// apply starts f, keeping the counters it starts from.
func (n *nemesis) apply(f *linkFault) {
	f.link = n.links[f.server].Stats()
	n.links[f.server].takeSlowest()
	f.ledger = ledgerStoreCounts(n.servers[f.server].Ledger())
	f.applied = true
	f.began = time.Since(n.start)
	n.links[f.server].setMode(f.kind)
	fmt.Printf("  store link of server %d: %s for %v, after %.1fs\n", f.server+1, f.kind, f.dur, f.began.Seconds())
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
	})
}
