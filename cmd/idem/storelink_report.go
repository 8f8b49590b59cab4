// This file runs a cluster's faults on its servers' links to the store (nemesis.go,
// storelink.go) for the length of a chaos run, checks after the final heal that no
// idempotency key is left in progress in the store, and reports what each fault did.

package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// settled is what the check after the final heal found.
type settled struct {
	checked    bool
	inProgress int           // the run's keys still in progress in the store
	after      time.Duration // from the final heal to the last look
	err        error         // the store could not be read
}

// startStoreFaults starts the planned store-link faults, their times counted from start.
// It does nothing without a plan.
func (c *cluster) startStoreFaults(start time.Time) {
	if len(c.plan) > 0 && c.nemesis == nil {
		c.nemesis = startNemesis(c.plan, c.store.links, c.servers, c.healAll(), c.clock, start)
	}
}

// stopStoreFaults ends the faults and heals every link. It may be called more than once.
func (c *cluster) stopStoreFaults() {
	if c.nemesis != nil {
		c.nemesis.stop()
	}
}

// settleStore heals the links, then waits up to two leases for the run's keys in progress
// in the store to be completed or released: every worker has finished, so none should
// remain. The count left is for the report and storeProblems.
func (c *cluster) settleStore(ctx context.Context) {
	if c.store == nil || c.store.inProgress == nil {
		return
	}
	c.stopStoreFaults()
	healed := time.Now()
	deadline := healed.Add(2 * c.lease)
	for {
		n, err := c.store.inProgress(ctx)
		c.settled = settled{checked: true, inProgress: n, after: time.Since(healed), err: err}
		if (err == nil && n == 0) || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// unknownOutcomes says how many store calls had an unknown outcome (a lost reply, a
// timeout) and how each was resolved, from the servers' ledgers (the middleware's
// Observer.StoreUncertain and StoreResolved): calls is the testserver.Ledger's StoreCalls.
type unknownOutcomes map[string]int

func (u unknownOutcomes) line() string {
	n := 0
	var how []string
	for _, k := range slices.Sorted(maps.Keys(u)) {
		if strings.HasPrefix(k, "uncertain ") {
			n += u[k]
			continue
		}
		how = append(how, fmt.Sprintf("%s %d", k, u[k]))
	}
	if len(how) == 0 {
		how = []string{"none pending"}
	}
	return fmt.Sprintf("store calls with an unknown outcome  %4d  resolved: %s", n, strings.Join(how, ", "))
}

// storeReport prints what the store-link faults did, one line per fault, the store
// failures the servers answered over the run, and what the check after the final heal
// found. It prints nothing for a cluster without store links.
func (c *cluster) storeReport(w io.Writer) {
	if c.store == nil || len(c.store.links) == 0 {
		return
	}
	l, applied := c.Ledger(), c.storeFaultsApplied()
	fmt.Fprintf(w, "the servers' links to the store (%s), each through a fault proxy of its own; lease %v\n", c.store.kind, c.lease)
	if len(c.plan) == 0 {
		fmt.Fprintln(w, "  no faults (-store-faults 0)")
	} else {
		fmt.Fprintf(w, "  %d of %d faults applied, one link at a time; what each did, until %v after its heal:\n", applied, len(c.plan), afterHeal)
	}
	faultLines(w, c.plan)
	fmt.Fprintf(w, "  answered 503, store unavailable   %6d  nothing ran for them; the client retries with the same key\n", l.StoreUnavailable)
	fmt.Fprintf(w, "  %s\n", unknownOutcomes(l.StoreCalls).line())
	switch s := c.settled; {
	case !s.checked:
	case s.err != nil:
		fmt.Fprintf(w, "  keys left in progress: the store could not be read after the final heal: %v\n", s.err)
	default:
		fmt.Fprintf(w, "  keys left in progress             %6d  in the store, %v after the final heal (every worker done; must be 0)\n",
			s.inProgress, s.after.Round(100*time.Millisecond))
	}
}

// faultLines prints one line per applied fault of plan: when, what, and what it did;
// then how many of each kind were healed.
func faultLines(w io.Writer, plan []*linkFault) {
	healed := map[string]int{}
	for _, f := range plan {
		if !f.applied {
			continue
		}
		fmt.Fprintf(w, "  - at %5.1fs, %s for %v: %s\n", f.began.Seconds(), f.what(),
			(f.healed - f.began).Round(100*time.Millisecond), f.effects())
		if f.err == nil {
			healed[f.kindName()]++
		}
	}
	var counts []string
	for _, k := range slices.Sorted(maps.Keys(healed)) {
		counts = append(counts, fmt.Sprintf("%d %s", healed[k], k))
	}
	if len(counts) > 0 {
		fmt.Fprintf(w, "  healed: %s\n", strings.Join(counts, ", "))
	}
}

// storeFaultsApplied is how many of the planned store-link faults began.
func (c *cluster) storeFaultsApplied() int { return applied(c.plan) }

// applied is how many faults of plan began.
func applied(plan []*linkFault) int {
	n := 0
	for _, f := range plan {
		if f.applied {
			n++
		}
	}
	return n
}

// planProblems says what fails a run in its plan of faults: one that never happened, one
// that could not be applied or healed.
func planProblems(plan []*linkFault) []string {
	var problems []string
	if n := applied(plan); n < len(plan) {
		problems = append(problems, fmt.Sprintf("only %d of %d link faults happened before the work was done; raise -n or lower -store-faults", n, len(plan)))
	}
	for _, f := range plan {
		if f.err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f.what(), f.err))
		}
	}
	return problems
}

// effects says what f did: from its link's counters and its server's ledger.
func (f *linkFault) effects() string {
	var parts []string
	add := func(n int64, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(f.stats.Resets, "connections reset after the store replied")
	add(f.stats.HeldReplies, "replies held")
	add(f.stats.LostReplies, "held replies never delivered (the client had given up)")
	add(f.stats.HeldRequests, "requests held (the store saw them late)")
	if f.slowest >= 10*time.Millisecond {
		parts = append(parts, fmt.Sprintf("slowest call through the link %v", f.slowest.Round(10*time.Millisecond)))
	}
	if n := f.stats.Unanswered; n > 0 {
		parts = append(parts, plural(int(n), "connection")+" closed with a request unanswered")
	}
	if f.net != nil && f.server >= 0 {
		window := (f.healed - f.began + afterHeal).Seconds()
		parts = append(parts, fmt.Sprintf("server %d received %d requests (%.0f/s)", f.server+1, f.requests, float64(f.requests)/window))
	}
	if f.settled > 0 {
		parts = append(parts, fmt.Sprintf("%s answered, the slowest after %v", plural(f.settled, "payment"), f.slowestCall.Round(10*time.Millisecond)))
	}
	add(int64(f.ledger.unavailable), "answered 503")
	add(int64(f.ledger.errors-f.ledger.unavailable), "other store errors")
	if f.err != nil {
		parts = append(parts, fmt.Sprintf("FAILED: %v", f.err))
	}
	if len(parts) == 0 {
		return "no traffic on the link meanwhile"
	}
	return strings.Join(parts, ", ")
}

// storeProblems says what fails the run on the store's side: a planned fault that never
// happened, a key left in progress after the final heal, a store that could not be read.
func (c *cluster) storeProblems() []string {
	problems := planProblems(c.plan)
	switch s := c.settled; {
	case !s.checked:
	case s.err != nil:
		problems = append(problems, fmt.Sprintf("the store could not be read after the final heal: %v", s.err))
	case s.inProgress > 0:
		problems = append(problems, fmt.Sprintf("%d idempotency keys left in progress in the store %v after the final heal", s.inProgress, s.after.Round(100*time.Millisecond)))
	}
	return problems
}
