// This file puts a fleet's chaos run (chaos_fleet.go) on the network of -netns
// (netns.go): each worker reaches the PostgreSQL journal through a link proxy of its own in
// the store's namespace, the nemesis faults the workers' links to the journal and to the
// server, and after the final heal the journal must hold nothing pending.

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/idem-go/idem"
)

// fleetNet is a fleet's side of -netns.
type fleetNet struct {
	links   []*storeLink // worker slot i's link to PostgreSQL
	urls    []string     // worker slot i's journal URL, through links[i]
	plan    []*linkFault
	nemesis *nemesis

	checked bool // checkJournal ran
	pending int  // operations pending in the journal after the final heal
	err     error
}

// setUpNet starts the workers' links to the journal and plans the faults; it does
// nothing without -netns.
func (f *fleet) setUpNet() error {
	cn := f.cfg.net
	if cn == nil {
		return nil
	}
	u, err := url.Parse(f.journalURL)
	if err != nil || u.Hostname() == "" {
		return usageError("idem chaos", "-netns needs a -journal URL with a host (and port) to forward to, not %s", displayName(f.journalURL))
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	f.net = &fleetNet{}
	for range f.cfg.workers {
		l, err := cn.storeLink(target)
		if err != nil {
			return err
		}
		f.net.links = append(f.net.links, l)
		v := *u
		v.Host = l.Addr()
		f.net.urls = append(f.net.urls, v.String())
	}
	if f.cfg.storeFaults > 0 {
		f.net.plan = cn.planNet(f.cfg.seed, f.cfg.storeFaults, cn.fleetLinks())
	}
	return nil
}

// journalFor is the journal URL worker slot uses.
func (f *fleet) journalFor(slot int) string {
	if f.net == nil {
		return f.journalURL
	}
	return f.net.urls[slot]
}

func (f *fleet) startNetFaults() {
	if f.net != nil && len(f.net.plan) > 0 {
		f.net.nemesis = startNemesis(f.net.plan, f.net.links, f.srv.servers, f.cfg.net.healAll, f.srv.clock, f.start)
	}
}

// stopNetFaults ends the faults and heals every link. It may be called more than once.
func (f *fleet) stopNetFaults() {
	if f.net != nil && f.net.nemesis != nil {
		f.net.nemesis.stop()
	}
}

// closeNet stops the faults and closes the links to the journal.
func (f *fleet) closeNet() {
	if f.net == nil {
		return
	}
	f.stopNetFaults()
	for _, l := range f.net.links {
		l.Close()
	}
}

// checkJournal counts, after the final heal, the operations left pending in the journal,
// over a connection of this process's own that no fault touches. Every worker has
// finished, so none should be.
func (f *fleet) checkJournal(ctx context.Context) {
	if f.net == nil {
		return
	}
	t, err := parsePostgres(f.journalURL)
	if err != nil {
		f.net.checked, f.net.err = true, err
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	recs, err := t.records(ctx, false)
	n := 0
	for _, r := range recs {
		if r.State == idem.StatePending {
			n++
		}
	}
	f.net.checked, f.net.pending, f.net.err = true, n, err
}

// netReport prints what each fault did and what the check after the final heal found.
func (f *fleet) netReport(w io.Writer) {
	if f.net == nil {
		return
	}
	fmt.Fprintf(w, "the network: %d of %d faults applied, one at a time; what each did, until %v after its heal:\n",
		applied(f.net.plan), len(f.net.plan), afterHeal)
	faultLines(w, f.net.plan)
	switch n := f.net; {
	case n.err != nil:
		fmt.Fprintf(w, "  pending in the journal: it could not be read after the final heal: %v\n", n.err)
	case n.checked:
		fmt.Fprintf(w, "  pending in the journal            %6d  after the final heal (every worker done; must be 0)\n", n.pending)
	}
}

// netProblems says what fails the run on the network's side.
func (f *fleet) netProblems() []string {
	if f.net == nil {
		return nil
	}
	problems := planProblems(f.net.plan)
	switch n := f.net; {
	case n.err != nil:
		problems = append(problems, fmt.Sprintf("the journal could not be read after the final heal: %v", n.err))
	case n.pending > 0:
		problems = append(problems, fmt.Sprintf("%d operations left pending in the journal after the final heal", n.pending))
	}
	return problems
}
