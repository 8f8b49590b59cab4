// This file holds "idem journal": read-only inspection of a journal file
// (ls, show). prune, stats, resume, and resolve and discard have files of
// their own (journal_prune.go, journal_stats.go, journal_resume.go,
// journal_resolve.go).

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
)

const journalUsage = `usage:
  idem journal ls [-state S] [-older-than D] [-op ID] [-json] FILE
                                       list operations, pending first; -state pending,settled,
                                       expired,failed (comma-separated); -older-than: created
                                       more than D ago (a Go duration: 90s, 30m, 48h); -op: this
                                       operation ID, or IDs starting with P given as 'P*';
                                       -json: one JSON object per line, bodies left out.
                                       ATTEMPTS are those recorded; N+? (pending, expired): a
                                       call records its attempts when it ends, so one in
                                       flight or killed mid-call may have reached the server
  idem journal show FILE ID|OPID|KEY   print one operation as JSON (body included; a body
                                       sealed with Options.Journal.Encryption prints as
                                       <encrypted key=ID>: the command has no keys)
  idem journal stats [-json] FILE      counts by state, the oldest pending operation, the
                                       earliest next attempt, the file size
  idem journal resume [-H 'Name: value']... [-Q 'name=value']... [-key-ttl D] [-max-attempts N]
                      [-timeout D] [-json] FILE
                                       send the pending operations that are due, now, with
                                       their keys and exact bytes; -H adds a header and -Q a
                                       query parameter that the journal does not keep
                                       (credentials), as PrepareResume does; exits 1 unless
                                       every one settled. Opens the file
                                       for writing: refused while an application holds it
  idem journal resolve (-op ID | -key K) -status N FILE
                                       mark a pending or expired operation settled with
                                       status N, once you found its outcome on the server
  idem journal discard (-op ID | -key K) [-reason R] FILE
                                       give a pending operation up for good: expired, never
                                       sent again. resolve and discard drop its body and, like
                                       resume, open the file for writing
  idem journal prune [-retention D] [-key-ttl T] [-force] FILE
                                       delete settled, failed and expired records last
                                       updated more than D ago; pending records stay. D
                                       below the key TTL T (24h) needs -force: a call that
                                       reuses a pruned operation ID would be sent again
  idem journal accept-older FILE       open from now on, on purpose, a journal whose newest
                                       commit's meta page is damaged as of the commit before
                                       it; reconcile with the server first: that commit may
                                       have held a write-ahead the server received

FILE may also be the journal view a running service serves (journal/journalhttp)
for ls, show and stats: http://host:port/debug/idem/journal (or https://; the
service's file lock keeps the command from its file). A view shows no body, header
value, URL query or identity; show prints what it shows.

FILE may also be a PostgreSQL journal (journal/pgjournal) for ls, show, stats,
resume and prune: postgres://user@host:port/db?sslmode=disable&schema=S&namespace=N
(schema and namespace default to idem and default; the rest goes to pgx). ls, show
and stats only read it, while its fleet runs; no subcommand creates its tables, and
a namespace no instance opened is refused, naming those in the schema.

ls, show and stats open the file read-only; no subcommand creates a file or
changes one that is not a journal. Flags may come before or after FILE.
"idem journal SUBCOMMAND -h" prints a subcommand's usage and all its flags.
`

func runJournal(args []string) error {
	if len(args) < 1 {
		fmt.Fprint(os.Stderr, journalUsage)
		return errUsage
	}
	if len(args) == 2 && args[0] == "help" { // idem journal help ls
		args = []string{args[1], "-h"}
	}
	return inCommand("idem journal "+args[0], journalSubcommand(args[0], args[1:]))
}

// journalSubcommand runs "idem journal sub rest...".
func journalSubcommand(sub string, rest []string) error {
	switch sub {
	case "ls":
		return journalLs(rest)
	case "show":
		return journalShow(rest)
	case "stats":
		return journalStats(rest)
	case "resume":
		return journalResume(rest)
	case "prune":
		return journalPrune(rest)
	case "accept-older":
		return journalAcceptOlder(rest)
	case "resolve":
		return journalResolve(rest)
	case "discard":
		return journalDiscard(rest)
	case "-h", "-help", "--help", "help":
		fmt.Print(journalUsage)
		return flag.ErrHelp
	default:
		if strings.HasPrefix(sub, "-") { // worded as the flag package words it
			return usageError("idem journal", "flag provided but not defined: %s", sub)
		}
		return usageError("idem journal", "unknown subcommand %q", sub)
	}
}

// parseInterspersed parses flags that may come before or after the
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseFile parses flags and exactly one FILE argument, in any order.
func parseFile(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageError(fs.Name(), "want one FILE, got %d arguments", len(pos))
	}
	return pos[0], nil
}

// readRecords reads every record of a journal opened read-only, so inspecting
// never changes it, with bodies if withBody. While an application holds a
// file it fails with journal.ErrLocked within a second; a PostgreSQL journal
// is read while its fleet runs.
func readRecords(cmd, path string, withBody bool) ([]*idem.Record, error) {
	if isView(path) {
		v, err := fetchView(cmd, path, nil)
		if err != nil {
			return nil, err
		}
		truncatedNote(cmd, v)
		return viewRecords(v), nil
	}
	if isPostgres(path) {
		t, err := parsePostgres(path)
		if err != nil {
			return nil, usageError(cmd, "%v", err)
		}
		return t.inspect(context.Background(), withBody)
	}
	if err := checkJournalFile(cmd, path); err != nil {
		return nil, err
	}
	j, err := boltjournal.OpenReadOnly(path, time.Second)
	if err != nil {
		return nil, openHint(err)
	}
	defer j.Close()
	return j.Records()
}

// lsFilter selects records for ls.
type lsFilter struct {
	states    map[idem.State]bool // nil: any
	olderThan time.Duration       // 0: any
	op        string              // "": any; "p*": prefix p
	now       time.Time
}

func (f *lsFilter) match(r *idem.Record) bool {
	if f.states != nil && !f.states[r.State] {
		return false
	}
	if f.olderThan > 0 && f.now.Sub(r.Created) <= f.olderThan {
		return false
	}
	if prefix, ok := strings.CutSuffix(f.op, "*"); ok {
		return strings.HasPrefix(r.OperationID, prefix)
	}
	return f.op == "" || r.OperationID == f.op
}

func parseStates(spec string) (map[idem.State]bool, error) {
	if spec == "" {
		return nil, nil
	}
	states := map[idem.State]bool{}
	for _, name := range strings.Split(spec, ",") {
		found := false
		for _, s := range []idem.State{idem.StatePending, idem.StateSettled, idem.StateExpired, idem.StateFailed} {
			if strings.EqualFold(strings.TrimSpace(name), s.String()) {
				states[s], found = true, true
			}
		}
		if !found {
			return nil, usageError("idem journal ls", "-state: unknown state %q (want pending, settled, expired or failed)", name)
		}
	}
	return states, nil
}

func journalLs(args []string) error {
	fs := newFlags("journal ls", "[-state S] [-older-than D] [-op ID] [-json] FILE",
		"Lists a journal's operations, pending first. Opens the file read-only.\n\n"+
			"ATTEMPTS counts the attempts recorded. While the outcome is unknown (pending,\n"+
			"expired) it reads N+?: a call records its attempts when it ends, so a call in\n"+
			"flight, or killed after its request left, may have reached the server even at 0+?.")
	state := fs.String("state", "", "only operations in these `states` (comma-separated)")
	olderThan := fs.Duration("older-than", 0, "only operations created more than this long ago")
	op := fs.String("op", "", "only this operation `ID`; a trailing * matches a prefix")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	file, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	if *olderThan < 0 {
		return usageError(fs.Name(), "-older-than must not be negative")
	}
	f := &lsFilter{olderThan: *olderThan, op: *op, now: time.Now()}
	if f.states, err = parseStates(*state); err != nil {
		return err
	}
	var recs []*idem.Record
	if isView(file) { // the view filters by state and operation ID before its limit
		v, err := fetchView(fs.Name(), file, url.Values{"state": {*state}, "op": {*op}})
		if err != nil {
			return err
		}
		defer truncatedNote(fs.Name(), v)
		recs = viewRecords(v)
	} else if recs, err = readRecords(fs.Name(), file, false); err != nil {
		return err
	}
	var shown []*idem.Record
	for _, r := range recs {
		if f.match(r) {
			shown = append(shown, r)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, r := range shown {
			if err := enc.Encode(recordJSON(r, false)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tOPERATION\tKEY\tREQUEST\tATTEMPTS\tSTATUS\tCREATED\tNEXT ATTEMPT")
	for _, r := range shown {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s %s\t%s\t%s\t%s\t%s\n", boltjournal.RecordID(r), r.State, orDash(r.OperationID), r.Key,
			r.Method, r.URL, attemptsText(r), orDash(statusText(r.Status)), r.Created.UTC().Format(time.RFC3339), orDash(nextAttempt(r)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("%d record(s)\n", len(shown))
	return nil
}

// jsonRecord is a Record as the command prints it: idem's JSON form of a
// record (journal.RecordJSON), with its ID first and, after it, the fields
// the command shows its own way: the state by name, the body hash only where
// there is one, whether more attempts may have reached the server, whether
// the record is sealed, and the body as text when asked for. A record sealed
// under a key (idem.Options.Journal.Encryption) is read without the keys:
// its body prints as "<encrypted key=ID>", and its headers, URL query and
// body hash are absent.
type jsonRecord struct {
	ID uint64 `json:"id"`
	journal.RecordJSON
	BodySHA256 string `json:"sha256,omitempty"`
	State      string `json:"state"`
	// AttemptsUncertain: attempts may have reached the server that Attempts
	// does not count (Record.AttemptsUncertain); ls prints "N+?".
	AttemptsUncertain bool   `json:"attempts_uncertain,omitempty"`
	Sealed            bool   `json:"sealed,omitempty"`
	Body              string `json:"body,omitempty"`
}

func recordJSON(r *idem.Record, withBody bool) jsonRecord {
	out := jsonRecord{ID: boltjournal.RecordID(r), RecordJSON: journal.JSONOf(r), BodySHA256: r.BodySHA256,
		State: r.State.String(), AttemptsUncertain: r.AttemptsUncertain(), Sealed: r.Sealed}
	switch {
	case !withBody:
	case r.Sealed && r.State != idem.StateSettled: // a settled record keeps no body
		out.Body = fmt.Sprintf("<encrypted key=%s>", r.EncryptionKeyID)
	default:
		out.Body = string(r.Body)
	}
	return out
}

func journalShow(args []string) error {
	fs := newFlags("journal show", "FILE ID|OPID|KEY", "Prints one operation as JSON, its body included, found by its record ID, operation\nID or idempotency key. Opens the file read-only.")
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return usageError(fs.Name(), "want FILE and an ID, operation ID or key, got %d arguments", len(args))
	}
	recs, err := readRecords(fs.Name(), args[0], true)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.OperationID == args[1] || r.Key == args[1] || fmt.Sprint(boltjournal.RecordID(r)) == args[1] {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false) // "<encrypted key=ID>" as written, for grep
			return enc.Encode(recordJSON(r, true))
		}
	}
	return fmt.Errorf("no operation %q in %s", args[1], args[0])
}

// attemptsText is the ATTEMPTS column: the attempts recorded, then "+?"
// while the outcome is unknown (pending, expired). A call records its
// attempts when it ends: one in flight, or cut short by a crash after its
// request left, is not counted yet, so "0+?" is an operation the server
// may have received, never "not sent" (Record.AttemptsUncertain).
func attemptsText(r *idem.Record) string {
	if r.AttemptsUncertain() {
		return fmt.Sprintf("%d+?", r.Attempts)
	}
	return fmt.Sprint(r.Attempts)
}

func statusText(status int) string {
	if status == 0 {
		return ""
	}
	return fmt.Sprint(status)
}

func nextAttempt(r *idem.Record) string {
	if r.State != idem.StatePending || r.NextAttempt.IsZero() {
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
