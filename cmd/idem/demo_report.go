// This file prints the demo's result (demo.go): both sides' payments, counted
// from each side's server ledger, side by side; a one-line verdict with the
// numbers; then idem's run in counters grouped by who counted them, in plain
// words, and one payment's story (demo_story.go).

package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idem-go/idem/testserver"
)

// tally is one side's payments by number of effects on its server's ledger.
type tally struct {
	once, twice, never, faults int
	l                          testserver.Ledger
}

func (s *side) tally(n int) tally {
	t := tally{l: s.srv.Ledger()}
	for i := range n {
		switch e := t.l.Effects[reference(i)]; {
		case e == 0:
			t.never++
		case e == 1:
			t.once++
		default:
			t.twice++
		}
	}
	for _, c := range t.l.Faults {
		t.faults += c
	}
	return t
}

// report prints the result and, if final, fails unless idem's side made
// every payment exactly once.
func report(cfg demoConfig, sides []*side, final bool) error {
	tallies := make([]tally, len(sides))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Println()
	head := "payments, from the server's ledger\t"
	for i, s := range sides {
		tallies[i] = s.tally(cfg.n)
		head += s.label + "\t"
	}
	fmt.Fprintln(tw, head)
	row := func(name string, v func(i int) any) {
		line := name + "\t"
		for i := range sides {
			line += fmt.Sprint(v(i)) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	row("made exactly once", func(i int) any { return tallies[i].once })
	row("made twice or more (charged again)", func(i int) any { return tallies[i].twice })
	row("never made", func(i int) any { return tallies[i].never })
	row("SIGKILLs of the sending process", func(i int) any { return sides[i].kills })
	row("faults the server injected", func(i int) any { return tallies[i].faults })
	row("time", func(i int) any { return sides[i].elapsed().Round(100 * time.Millisecond) })
	tw.Flush()

	last := len(sides) - 1
	s, t := sides[last], tallies[last]
	if s.plain { // interrupted before idem's side started
		return nil
	}
	fmt.Println()
	s.details(cfg, t)
	s.srv.storeReport(os.Stdout)
	if len(sides) > 1 {
		tellStory(sides[0], sides[last])
	} else {
		tellStory(nil, s)
	}
	if !final {
		return nil
	}
	verdict := fmt.Sprintf("%d/%d payments made exactly once through %s and %d injected faults", t.once, cfg.n, plural(s.kills, "SIGKILL"), t.faults)
	if n := s.srv.storeFaultsApplied(); n > 0 {
		verdict += fmt.Sprintf(", with %s on the servers' links to the store", plural(n, "fault"))
	}
	if len(sides) > 1 {
		p := tallies[0]
		verdict += fmt.Sprintf("; %s: %d charged twice or more, %d never charged", sides[0].label, p.twice, p.never)
		if p.twice+p.never == 0 {
			verdict += " (the other client was lucky on this plan: try another -seed)"
		}
	}
	refs := make([]string, cfg.n)
	for i := range refs {
		refs[i] = reference(i)
	}
	var also string // the store's problems, after the ledger's
	if problems := s.srv.storeProblems(); len(problems) > 0 {
		also = "; " + strings.Join(problems, "; ")
	}
	if err := t.l.Check(refs); err != nil {
		var ce *testserver.CheckError
		if errors.As(err, &ce) {
			return fmt.Errorf("NOT exactly once %s: %d charged twice or more, %d never charged (%w)%s", s.label, len(ce.Duplicated), len(ce.Missing), err, also)
		}
		return fmt.Errorf("NOT exactly once %s: %w%s", s.label, err, also)
	}
	if also != "" {
		return fmt.Errorf("%d/%d payments made exactly once, but%s", t.once, cfg.n, strings.TrimPrefix(also, ";"))
	}
	fmt.Println("\n" + verdict)
	return nil
}

// elapsed is the side's wall time: to its end, or until now while it runs.
func (s *side) elapsed() time.Duration {
	if s.wall > 0 {
		return s.wall
	}
	return time.Since(s.start)
}

// details prints idem's run as counters grouped by who counted them.
func (s *side) details(cfg demoConfig, t tally) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	row := func(name string, v any, note string) { fmt.Fprintf(tw, "  %s\t%6v\t  %s\n", name, v, note) }
	s.mu.Lock()
	lives, resumed := s.life, s.resumed
	s.mu.Unlock()
	fmt.Fprintln(tw, "the client, "+s.label+"\t\t")
	row("payments to make", cfg.n, "")
	row("sending processes", lives, fmt.Sprintf("%d of them killed with SIGKILL mid-work", s.kills))
	row("resumed from the journal", resumed, "outcome unknown when a process died or gave up: re-sent, same key")
	fmt.Fprintln(tw, "the server\t\t")
	retries := ""
	if t.l.Requests > cfg.n {
		retries = fmt.Sprintf("%d more than payments: retries", t.l.Requests-cfg.n)
	}
	row("requests received", t.l.Requests, retries)
	if len(s.srv.servers) > 1 {
		row("  by server (round robin)", s.srv.split(), "each connection to the next; one idempotency store for all")
	}
	row("payments created", t.l.Payments(), "")
	row("answered from its stored result", t.l.Replays, "a key seen before: the first answer again, no new charge")
	row("\"in progress, retry later\" (409)", t.l.InProgress, "a key whose first request was still running")
	fmt.Fprintf(tw, "faults the server injected\t%6v\t\n", t.faults)
	for _, k := range slices.Sorted(maps.Keys(t.l.Faults)) {
		row(testserver.DescribeFault(k), t.l.Faults[k], "")
	}
	tw.Flush()
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
