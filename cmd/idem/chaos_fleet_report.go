// This file prints the result of the chaos run on a fleet (chaos_fleet.go)
// from the server's ledger, with what the survivors adopted from dead
// processes (chaos_adopt.go), and fails the run unless every payment was
// made exactly once and every planned kill and restart happened.

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idem-go/idem/testserver"
)

func (f *fleet) report(wall time.Duration) error {
	l := f.srv.Ledger()
	var once, twice, never int
	refs := make([]string, f.cfg.n)
	for i := range refs {
		refs[i] = reference(i)
		switch e := l.Effects[refs[i]]; {
		case e == 0:
			never++
		case e == 1:
			once++
		default:
			twice++
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	row := func(name string, v any, note string) { fmt.Fprintf(tw, "  %s\t%6v\t  %s\n", name, v, note) }
	fmt.Println("\npayments, from the server's ledger")
	row("made exactly once", once, "")
	row("made twice or more", twice, "")
	row("never made", never, "")
	fmt.Fprintln(tw, "the fleet\t\t")
	row("worker processes", f.cfg.workers, fmt.Sprintf("sharing one PostgreSQL journal, lease %v", f.cfg.lease))
	row("SIGKILLs, then restarted", f.kills, "")
	row("SIGKILLed for good", 1, fmt.Sprintf("worker %d, after %.1fs", f.cfg.workers, f.goneAt.Seconds()))
	row("database restarts", restarts(f.restarted), f.restarted)
	row("adopted from dead processes", f.adopted, fmt.Sprintf("re-sent with the dead process's key; %d by another worker, %d by its next life", f.byOther, f.adopted-f.byOther))
	row("worst adoption delay", f.worst.Round(time.Millisecond), fmt.Sprintf("SIGKILL to the adopter's attempt (%s); bound: lease + resume interval", orDash(f.worstRef)))
	row("worker errors", f.errors, "calls refused while the database was away (their payments sent later)")
	fmt.Fprintln(tw, "the server\t\t")
	row("requests received", l.Requests, "")
	row("answered from its stored result", l.Replays, "the same key again: no new charge")
	row("\"in progress\" (409)", l.InProgress, "")
	row("time", wall.Round(100*time.Millisecond), "")
	tw.Flush()
	f.srv.storeReport(os.Stdout)
	f.netReport(os.Stdout)

	var problems []string
	if err := l.Check(refs); err != nil {
		var ce *testserver.CheckError
		if errors.As(err, &ce) {
			problems = append(problems, fmt.Sprintf("NOT exactly once: %d charged twice or more, %d never charged", len(ce.Duplicated), len(ce.Missing)))
		} else {
			problems = append(problems, "NOT exactly once: "+err.Error())
		}
	}
	if f.kills < f.cfg.kills {
		problems = append(problems, fmt.Sprintf("only %d of %d kills happened before the work was done; lower -kill-within or raise -n", f.kills, f.cfg.kills))
	}
	if !f.gone[f.cfg.workers-1] {
		problems = append(problems, "the work was done before a worker could be killed for good; raise -n")
	}
	if f.cfg.restartDB != "" && restarts(f.restarted) != 1 {
		problems = append(problems, "the database restart did not happen: "+orDash(f.restarted))
	}
	problems = append(problems, f.srv.storeProblems()...)
	problems = append(problems, f.netProblems()...)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Printf("\n%d/%d payments made exactly once by %d workers through %s, one worker killed for good and %d database restart(s); %d operations adopted from dead processes, the slowest %v after its SIGKILL\n",
		once, f.cfg.n, f.cfg.workers, plural(f.kills, "SIGKILL"), restarts(f.restarted), f.adopted, f.worst.Round(time.Millisecond))
	return nil
}

// restarts is 1 if the database restart happened, from its description.
func restarts(what string) int {
	if strings.HasPrefix(what, "restarted") {
		return 1
	}
	return 0
}
