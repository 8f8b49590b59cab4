// This file holds "idem journal": read-only inspection of a journal file
// (ls, show) and pruning of old settled records (prune).

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/idem-go/idem"
)

const journalUsage = `usage:
  idem journal ls FILE                 list operations, pending first
  idem journal show FILE ID|OPID|KEY   print one operation as JSON (body included)
  idem journal prune [-retention D] FILE
                                       delete settled, failed and expired records last
                                       updated more than D ago (a Go duration: 168h, 30m;
                                       0 deletes every finished record); pending records stay
`

func runJournal(args []string) error {
	if len(args) < 1 {
		fmt.Fprint(os.Stderr, journalUsage)
		return flag.ErrHelp
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "ls":
		return journalLs(rest)
	case "show":
		return journalShow(rest)
	case "prune":
		return journalPrune(rest)
	case "-h", "-help", "--help", "help":
		fmt.Print(journalUsage)
		return flag.ErrHelp
	default:
		return fmt.Errorf("journal: unknown subcommand %q\n%s", sub, journalUsage)
	}
}

// readRecords reads every record of a journal opened read-only, so inspecting
// never changes it. While an application holds the file it fails with
// ErrJournalLocked within a second.
func readRecords(path string) ([]*idem.Record, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	j, err := idem.OpenJournalReadOnly(path, time.Second)
	if errors.Is(err, idem.ErrJournalLocked) {
		return nil, fmt.Errorf("%w\n(an application has it open; stop it, or inspect a copy)", err)
	}
	if err != nil {
		return nil, err
	}
	defer j.Close()
	return j.Records()
}

func journalLs(args []string) error {
	if len(args) != 1 {
		return errors.New("journal ls: want one FILE")
	}
	recs, err := readRecords(args[0])
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tOPERATION\tKEY\tREQUEST\tATTEMPTS\tSTATUS\tCREATED\tNEXT ATTEMPT")
	for _, r := range recs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s %s\t%d\t%s\t%s\t%s\n", r.ID, r.State, orDash(r.OperationID), r.Key,
			r.Method, r.URL, r.Attempts, orDash(statusText(r.Status)), r.Created.UTC().Format(time.RFC3339), orDash(nextAttempt(r)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("%d record(s)\n", len(recs))
	return nil
}

func journalShow(args []string) error {
	if len(args) != 2 {
		return errors.New("journal show: want FILE and an ID, operation ID or key")
	}
	recs, err := readRecords(args[0])
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.OperationID == args[1] || r.Key == args[1] || fmt.Sprint(r.ID) == args[1] {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				ID uint64 `json:"id"`
				*idem.Record
				State string `json:"state"`
				Body  string `json:"body,omitempty"`
			}{r.ID, r, r.State.String(), string(r.Body)})
		}
	}
	return fmt.Errorf("journal show: no operation %q in %s", args[1], args[0])
}

func journalPrune(args []string) error {
	fs := flag.NewFlagSet("journal prune", flag.ContinueOnError)
	retention := fs.Duration("retention", idem.DefaultRetention, "keep records updated more recently than this")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("journal prune: want one FILE")
	}
	if _, err := os.Stat(fs.Arg(0)); err != nil {
		return err
	}
	j, err := idem.OpenJournal(fs.Arg(0), &idem.Options{Retention: *retention})
	if err != nil {
		return err
	}
	defer j.Close()
	n, err := j.Prune(*retention)
	if err != nil {
		return err
	}
	fmt.Printf("pruned %d record(s) from %s\n", n, fs.Arg(0))
	return nil
}

func statusText(status int) string {
	if status == 0 {
		return ""
	}
	return fmt.Sprint(status)
}

func nextAttempt(r *idem.Record) string {
	if r.State != idem.Pending || r.NextAttempt.IsZero() {
		return ""
	}
	return r.NextAttempt.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
