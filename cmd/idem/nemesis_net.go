//go:build linux

// This file plans the nemesis's faults on the network of "idem chaos -netns" (netns.go):
// partitions both ways and one way, packet loss and slow links, each on a link between two
// of the run's namespaces drawn from -seed, one at a time; nemesis.go applies them.

package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idem-go/idem/internal/netlab"
)

// How long each fault of the network lasts: a partition longer than the servers' lease
// (1 s) and the fleet journal's (2 s by default), so that a holder cut off cannot renew
// its lease. The gap between two faults, 1 to 1.5 s, is never shorter than afterHeal.
const (
	partitionNetFor = 2200 * time.Millisecond
	degradeFor      = 2 * time.Second // packet loss, a slow link
	lossPercent     = 30
)

// netLink is a link of the run's network that the nemesis may fault, and what measures it.
type netLink struct {
	client, server *netlab.Host // the side that calls, the side that answers
	link           int          // the link proxy on it, which measures it and can slow it; -1 for none
	on             string       // the link proxy's name, for the report
	srv            int          // the fake server whose ledger measures it; -1 for none
}

// serverLinks are the links of a cluster of servers that share a store: each server's to
// the store (link proxy i) and, behind a round-robin proxy, the proxy's to each server.
func (cn *chaosNet) serverLinks() []netLink {
	var links []netLink
	for i, s := range cn.servers {
		links = append(links, netLink{client: s, server: cn.store, link: i, on: fmt.Sprintf("server %d's link to the store", i+1), srv: i})
		if cn.lb != nil {
			links = append(links, netLink{client: cn.lb, server: s, link: -1, srv: i})
		}
	}
	return links
}

// fleetLinks are the links of a fleet: each worker's to the PostgreSQL journal (through
// link proxy i) and to the fake server (or the round-robin proxy in front of several),
// but the last worker's, which is killed for good a third of the way in.
func (cn *chaosNet) fleetLinks() []netLink {
	var links []netLink
	for i, w := range cn.workers[:len(cn.workers)-1] {
		links = append(links, netLink{client: w, server: cn.store, link: i, on: fmt.Sprintf("worker %d's link to the journal", i+1), srv: 0})
		if cn.lb != nil {
			links = append(links, netLink{client: w, server: cn.lb, link: -1, srv: -1})
		} else {
			links = append(links, netLink{client: w, server: cn.servers[0], link: -1, srv: 0})
		}
	}
	return links
}

// planNet draws rounds rounds of faults from seed on links: each round has two
// partitions both ways, one of the requests (the client's packets dropped), one of the
// replies (the server side's packets dropped), then packet loss and a slow link in turn
// (a slow link when loss cannot be made), each on a link drawn at random, in a random
// order, each 1 to 1.5 s after the last one's heal.
func (cn *chaosNet) planNet(seed uint64, rounds int, links []netLink) []*linkFault {
	rng := rand.New(rand.NewPCG(seed, 0x0e7105))
	const (
		both = iota
		requests
		replies
		loss
		slow
	)
	var slowable []netLink
	for _, l := range links {
		if l.link >= 0 {
			slowable = append(slowable, l)
		}
	}
	var plan []*linkFault
	var at time.Duration
	for r := range rounds {
		extra := slow
		if r%2 == 0 && cn.loss == "" {
			extra = loss
		}
		kinds := []int{both, both, requests, replies, extra}
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, k := range kinds {
			at += time.Second + time.Duration(rng.Int64N(int64(time.Second/2)))
			l := links[rng.IntN(len(links))]
			f := &linkFault{link: l.link, on: l.on, server: l.srv, at: at, dur: partitionNetFor}
			nf := &netlab.Fault{From: l.client, To: l.server}
			switch k {
			case both:
				nf.Kind = netlab.Partition
			case requests:
				nf.Kind = netlab.OneWay
			case replies:
				nf.Kind, nf.From, nf.To = netlab.OneWay, l.server, l.client
			case loss:
				nf.Kind, nf.Percent, f.dur = netlab.Loss, lossPercent, degradeFor
			case slow:
				l = slowable[rng.IntN(len(slowable))]
				f.kind, f.link, f.on, f.server, f.dur, nf = linkSlow, l.link, l.on, l.srv, degradeFor, nil
			}
			if nf != nil {
				f.net = labFault{cn.lab, nf}
			}
			plan = append(plan, f)
			at += f.dur
		}
	}
	return plan
}
