// This file sets up "idem chaos -netns": it checks that the run has parts to put in
// namespaces and links to fault, then makes its network (netns.go). The fleet's side is in
// chaos_fleet_net.go.

package main

import (
	"fmt"
	"os"
)

// netnsPayments is -n's default with -netns: the nemesis's three rounds of faults last
// about 50 s, and 2,000 payments may be done in less (a fleet on PostgreSQL took 44 s).
const netnsPayments = 3000

// setUpNetns makes the network of a chaos run with cfg and workers worker slots, and sets
// cfg.net; nSet says -n was given. The returned func deletes it; call it once every worker
// process has ended.
func setUpNetns(cfg *demoConfig, workers int, nSet bool) (func(), error) {
	fleet := isPostgres(cfg.journal)
	switch {
	case fleet && cfg.serverStore != "":
		return nil, usageError("idem chaos", "-netns on a fleet runs its servers on a store in memory: leave out -server-store")
	case !fleet && (cfg.servers < 2 || cfg.serverStore == ""):
		return nil, usageError("idem chaos", "-netns needs -workers N with a postgres:// -journal, or -servers 2 or more with a redis:// or postgres:// -server-store")
	case cfg.serverAddr != "" || cfg.via != "":
		return nil, usageError("idem chaos", "-netns chooses the servers' addresses itself: leave out -server-addr and -via")
	}
	if !fleet {
		workers = 1
	}
	if !nSet {
		cfg.n = netnsPayments
	}
	cn, err := newChaosNet(workers, max(cfg.servers, 1))
	if err != nil {
		return nil, err
	}
	cfg.net = cn
	fmt.Println(cn.describe())
	return func() {
		if err := cn.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "idem chaos: deleting the namespaces: %v\n", err)
		}
	}, nil
}
