// This file holds the fake payments server the demo and chaos runs send to: one testserver,
// or several sharing one idempotency Store (in memory, Redis or PostgreSQL:
// serverstore.go) and one registry of payments behind the round-robin TCP proxy of
// rrproxy.go, so that copies of one key reach different instances and only the shared
// Store keeps them to one payment.

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/testserver"
)

// cluster is the server side of a run. URL is where clients send.
type cluster struct {
	URL     string
	servers []*testserver.Server
	proxy   *rrProxy
	store   *serverStore    // nil for one server with a memstore of its own
	mem     *memstore.Store // the Store in memory, whose live keys a soak counts; nil in Redis or PostgreSQL
	lease   time.Duration
	net     *chaosNet  // the namespaces the parts run in (chaos -netns); nil for none
	clock   *callClock // the payments' calls, from the workers' lines, for the nemesis

	// Faults on the servers' links to the store (storelink_report.go).
	plan    []*linkFault // nil for none
	nemesis *nemesis     // while they run
	settled settled      // what the final check found
}

// newCluster starts n fake servers with opts, each with its own draw of the fault plan
// (seed, seed+1, ...), sharing the Store storeURL names ("" for one in memory) and one
// registry of payments, as the instances of one service share their database: so a key
// stuck on one server is recovered on another from the payment the first made
// (testserver.Options.Payments). One server listens on addr itself; several listen on
// free loopback ports behind a proxy on addr. With a Redis or PostgreSQL store, each
// server has its own client and link to it, and storeFaults faults of each kind are
// planned on those links, from seed (startStoreFaults applies them). With cn (chaos
// -netns), each server and the proxy listen in namespaces of their own, and storeFaults
// rounds of faults are planned on the network's links instead (nemesis_net.go).
func newCluster(addr string, n int, storeURL string, opts testserver.Options, seed uint64, faults string, storeFaults int, cn *chaosNet) (*cluster, error) {
	c := &cluster{lease: cmp.Or(max(opts.Lease, 0), testserver.DefaultLease), net: cn, clock: newCallClock()}
	if n > 1 || storeURL != "" {
		var err error
		if c.store, err = openServerStore(storeURL, n, cn); err != nil {
			return nil, err
		}
		opts.Payments = testserver.NewPayments()
		switch {
		case storeFaults > 0 && cn != nil && len(c.store.links) > 0:
			c.plan = cn.planNet(seed, storeFaults, cn.serverLinks())
		case storeFaults > 0 && len(c.store.links) > 0:
			c.plan = planLinkFaults(seed, n, storeFaults)
		}
	}
	var backends []string
	for i := range n {
		o := opts
		if c.store != nil {
			o.Store = c.store.stores[i]
		} else {
			o.Store = memstore.New(nil) // what testserver would make, but in reach of liveKeys
		}
		if m, ok := o.Store.(*memstore.Store); ok {
			c.mem = m
		}
		plan, err := testserver.ParsePlan(seed+uint64(i), faults)
		if err != nil {
			c.Close()
			return nil, err
		}
		o.Plan = plan
		listen := addr
		if n > 1 {
			listen = "127.0.0.1:0"
		}
		s, err := c.listen(i, listen, &o)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.servers = append(c.servers, s)
		backends = append(backends, strings.TrimPrefix(s.URL, "http://"))
	}
	c.URL = c.servers[0].URL
	if n > 1 {
		p, err := c.newProxy(addr, backends)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.proxy, c.URL = p, "http://"+p.Addr()
	}
	return c, nil
}

// listen starts server i on addr, or, with -netns, in its namespace.
func (c *cluster) listen(i int, addr string, o *testserver.Options) (*testserver.Server, error) {
	if c.net != nil {
		return c.net.listenServer(i, o)
	}
	return testserver.Listen(addr, o)
}

// newProxy starts the round-robin proxy on addr, or, with -netns, in its namespace.
func (c *cluster) newProxy(addr string, backends []string) (*rrProxy, error) {
	if c.net != nil {
		ln, err := c.net.proxyListener()
		if err != nil {
			return nil, err
		}
		return rrProxyOn(ln, backends, c.net.proxyDial), nil
	}
	return newRRProxy(addr, backends)
}

// healAll heals the network's faults (-netns); nil without.
func (c *cluster) healAll() func() error {
	if c.net == nil {
		return nil
	}
	return c.net.healAll
}

// liveKeys is how many unexpired keys the Store in memory holds, or -1 for
// a Store elsewhere (or no cluster, in tests).
func (c *cluster) liveKeys() int {
	if c == nil || c.mem == nil {
		return -1
	}
	return c.mem.Len()
}

// describe names the servers for a run's heading.
func (c *cluster) describe() string {
	if len(c.servers) == 1 {
		return c.URL
	}
	d := fmt.Sprintf("%s (a round-robin proxy to %d servers sharing one idempotency store", c.URL, len(c.servers))
	if len(c.store.links) > 0 {
		d += fmt.Sprintf(" in %s, each through a link of its own", c.store.kind)
	}
	if len(c.plan) > 0 {
		d += fmt.Sprintf(", %d faults to come on those links", len(c.plan))
	}
	return d + ")"
}

// Ledger adds up the servers' ledgers: a reference paid on two servers counts two.
func (c *cluster) Ledger() testserver.Ledger {
	sum := testserver.Ledger{Effects: map[string]int{}, Faults: map[string]int{}, StoreCalls: map[string]int{}}
	for _, s := range c.servers {
		l := s.Ledger()
		for ref, n := range l.Effects {
			sum.Effects[ref] += n
		}
		for k, n := range l.Faults {
			sum.Faults[k] += n
		}
		for k, n := range l.StoreCalls {
			sum.StoreCalls[k] += n
		}
		sum.Requests += l.Requests
		sum.Replays += l.Replays
		sum.InProgress += l.InProgress
		sum.Mismatches += l.Mismatches
		sum.MissingKey += l.MissingKey
		sum.StoreUnavailable += l.StoreUnavailable
		sum.StoreErrors += l.StoreErrors
	}
	return sum
}

// split says how many requests each server received: "390 / 388".
func (c *cluster) split() string {
	var parts []string
	for _, s := range c.servers {
		parts = append(parts, fmt.Sprint(s.Ledger().Requests))
	}
	return strings.Join(parts, " / ")
}

// paymentIDs asks the servers' registry of payments for the payments made for ref: one
// server answers for all, since they share it.
func (c *cluster) paymentIDs(ref string) []string {
	client := http.DefaultClient
	if c.net != nil { // the servers are in namespaces of their own: ask from the proxy's
		client = &http.Client{Transport: &http.Transport{DialContext: c.net.proxyDial}}
	}
	resp, err := client.Get(c.servers[0].URL + "/payments?reference=" + url.QueryEscape(ref))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	var ids []string
	for _, p := range list.Data {
		ids = append(ids, p.ID)
	}
	return ids
}

// Close stops the store-link faults, the proxy, the servers and the Store.
func (c *cluster) Close() {
	c.stopStoreFaults()
	if c.proxy != nil {
		c.proxy.Close()
	}
	for _, s := range c.servers {
		s.Close()
	}
	if c.store != nil {
		c.store.Close()
	}
}
