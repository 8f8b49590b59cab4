// This file holds the fake payments server the demo and chaos runs send to: one testserver,
// or several sharing one idempotency Store (in memory, Redis or PostgreSQL:
// serverstore.go) and one registry of payments behind the round-robin TCP proxy of
// rrproxy.go, so that copies of one key reach different instances and only the shared
// Store keeps them to one payment.

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/idem-go/idem/testserver"
)

// cluster is the server side of a run. URL is where clients send.
type cluster struct {
	URL        string
	servers    []*testserver.Server
	proxy      *rrProxy
	closeStore func()
}

// newCluster starts n fake servers with opts, each with its own draw of the fault plan
// (seed, seed+1, ...), sharing the Store storeURL names ("" for one in memory) and one
// registry of payments, as the instances of one service share their database: so a key
// stuck on one server is recovered on another from the payment the first made
// (testserver.Options.Payments). One server listens on addr itself; several listen on
// free loopback ports behind a proxy on addr.
func newCluster(addr string, n int, storeURL string, opts testserver.Options, seed uint64, faults string) (*cluster, error) {
	c := &cluster{closeStore: func() {}}
	if n > 1 || storeURL != "" {
		store, closeStore, err := openServerStore(storeURL)
		if err != nil {
			return nil, err
		}
		opts.Store, c.closeStore = store, closeStore
		opts.Payments = testserver.NewPayments()
	}
	var backends []string
	for i := range n {
		o := opts
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
		s, err := testserver.Listen(listen, &o)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.servers = append(c.servers, s)
		backends = append(backends, strings.TrimPrefix(s.URL, "http://"))
	}
	c.URL = c.servers[0].URL
	if n > 1 {
		p, err := newRRProxy(addr, backends)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.proxy, c.URL = p, "http://"+p.Addr()
	}
	return c, nil
}

// describe names the servers for a run's heading.
func (c *cluster) describe() string {
	if len(c.servers) == 1 {
		return c.URL
	}
	return fmt.Sprintf("%s (a round-robin proxy to %d servers sharing one idempotency store)", c.URL, len(c.servers))
}

// Ledger adds up the servers' ledgers: a reference paid on two servers counts two.
func (c *cluster) Ledger() testserver.Ledger {
	sum := testserver.Ledger{Effects: map[string]int{}, Faults: map[string]int{}}
	for _, s := range c.servers {
		l := s.Ledger()
		for ref, n := range l.Effects {
			sum.Effects[ref] += n
		}
		for k, n := range l.Faults {
			sum.Faults[k] += n
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
	resp, err := http.Get(c.servers[0].URL + "/payments?reference=" + url.QueryEscape(ref))
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

// Close stops the proxy, the servers and the Store.
func (c *cluster) Close() {
	if c.proxy != nil {
		c.proxy.Close()
	}
	for _, s := range c.servers {
		s.Close()
	}
	c.closeStore()
}
