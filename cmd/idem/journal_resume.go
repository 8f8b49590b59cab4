// This file holds "idem journal resume": an operator pushes a journal's due
// pending operations by hand, with the keys and bytes journaled, adding the
// credentials the journal never keeps with -H flags (what PrepareResume does
// in an application). It opens the journal for writing, so it refuses while
// an application holds the file.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
)

// headerFlags collects repeated -H 'Name: value' flags. Values are never
// printed: they are usually credentials.
type headerFlags http.Header

func (h headerFlags) String() string { return names(h) }

// names lists a flag's names, never its values, sorted.
func names(m map[string][]string) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

func (h headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return errors.New(`want "Name: value"`)
	}
	http.Header(h).Add(name, strings.TrimSpace(value))
	return nil
}

// queryFlags collects repeated -Q 'name=value' flags: query parameters the
// journal never keeps (Options.SensitiveQueryParams). Values are never
// printed.
type queryFlags url.Values

func (q queryFlags) String() string { return names(q) }

func (q queryFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return errors.New(`want "name=value"`)
	}
	url.Values(q).Add(name, value)
	return nil
}

// resumeLine is one outcome as -json prints it.
type resumeLine struct {
	ID          uint64 `json:"id"`
	OperationID string `json:"op,omitempty"`
	Key         string `json:"key"`
	Result      string `json:"result"` // settled, pending, expired, not sent
	Status      int    `json:"status,omitempty"`
	Error       string `json:"error,omitempty"`
}

func journalResume(args []string) error {
	fs := newFlags("journal resume", "[-H 'Name: value']... [-Q 'name=value']... [-key-ttl D] [-max-attempts N] [-timeout D] [-json] FILE",
		"Sends the pending operations that are due, now, with their keys and exact bytes;\n-H and -Q add the credentials the journal does not keep. Exits 1 unless every one\nsettled. Opens the file for writing: refused while an application holds it.")
	headers := headerFlags{}
	fs.Var(headers, "H", "add a header to every resumed request, as `'Name: value'` (repeatable)")
	query := queryFlags{}
	fs.Var(query, "Q", "add a query parameter the journal does not keep (Options.SensitiveQueryParams) to every resumed request, as `name=value` (repeatable)")
	keyTTL := fs.Duration("key-ttl", idem.DefaultKeyTTL, "how long the server keeps a key: older pending operations expire instead of being sent (use the application's KeyTTL)")
	maxAttempts := fs.Int("max-attempts", idem.DefaultMaxAttempts, "attempts per operation")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long; unfinished operations stay pending")
	asJSON := fs.Bool("json", false, "one JSON object per outcome")
	file, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	if *maxAttempts < 1 || *timeout <= 0 || *keyTTL <= 0 {
		return usageError(fs.Name(), "-max-attempts, -timeout and -key-ttl must be positive")
	}
	opts := &idem.Options{KeyTTL: *keyTTL, MaxAttempts: *maxAttempts,
		PrepareResume: func(r *http.Request) error {
			for k, vs := range headers {
				r.Header[k] = append([]string(nil), vs...)
			}
			if len(query) > 0 { // after the journaled query, which keeps its bytes
				r.URL.RawQuery = strings.TrimPrefix(r.URL.RawQuery+"&"+url.Values(query).Encode(), "&")
			}
			return nil
		}}
	j, err := openForResume(fs.Name(), file)
	if err != nil {
		return err
	}
	defer j.close()
	tr, err := idem.NewTransport(j.store, opts)
	if err != nil {
		return err
	}
	recs, err := j.records()
	if err != nil {
		return err
	}
	now := time.Now()
	if c, ok := j.store.(journal.Clock); ok {
		now = c.Now()
	}
	notDue, next, due := listPending(recs, now)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	counts := map[string]int{}
	enc := json.NewEncoder(os.Stdout)
	err = tr.Resume(ctx, func(o idem.Outcome) {
		line := outcomeLine(o)
		counts[line.Result]++
		delete(due, line.ID)
		if *asJSON {
			enc.Encode(line)
			return
		}
		fmt.Printf("%-9s %-4s %s (id %d, key %s)", line.Result, statusText(line.Status), orDash(line.OperationID), line.ID, line.Key)
		if line.Error != "" {
			fmt.Printf(": %s", line.Error)
		}
		fmt.Println()
	})
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Printf("resumed %d: %d settled, %d pending, %d expired, %d not sent\n",
			counts["settled"]+counts["pending"]+counts["expired"]+counts["not sent"],
			counts["settled"], counts["pending"], counts["expired"], counts["not sent"])
		if notDue > 0 {
			fmt.Printf("not yet due: %d (waiting out a Retry-After or backoff; the earliest at %s)\n", notDue, next.UTC().Format(time.RFC3339))
		}
		if len(due) > 0 {
			// Resume reports one operation per host its retry budget held
			// back, and leaves that host's others for a later pass; it also
			// leaves what a running instance of a fleet leases.
			why := "held back by the retry budget: their server is failing"
			if isPostgres(file) {
				why += ", or leased by a running instance"
			}
			fmt.Printf("not tried: %d (%s; run again later)\n", len(due), why)
		}
	}
	if left := counts["pending"] + counts["expired"] + counts["not sent"] + len(due) + notDue; left > 0 {
		return fmt.Errorf("%d operation(s) not settled; see above", left)
	}
	return nil
}

// listPending counts the pending operations Resume will skip because their
// next-attempt time has not come, with the earliest of those times, and
// returns the IDs of the due ones, which Resume is to report.
func listPending(recs []*idem.Record, now time.Time) (int, time.Time, map[uint64]bool) {
	n, next, due := 0, time.Time{}, map[uint64]bool{}
	for _, r := range recs {
		switch {
		case r.State != idem.StatePending:
		case r.NextAttempt.After(now):
			n++
			if next.IsZero() || r.NextAttempt.Before(next) {
				next = r.NextAttempt
			}
		default:
			due[boltjournal.RecordID(r)] = true
		}
	}
	return n, next, due
}

// resumable is a journal opened for resume: a file, or a PostgreSQL
// journal.
type resumable struct {
	store   journal.Store
	records func() ([]*idem.Record, error)
	close   func()
}

// openForResume opens the journal arg names for writing. A file is opened
// as a journal and a Transport, not with idem.Open: opening must not prune
// records the application's Retention would keep.
func openForResume(cmd, arg string) (*resumable, error) {
	if isPostgres(arg) {
		t, err := parsePostgres(arg)
		if err != nil {
			return nil, usageError(cmd, "%v", err)
		}
		pool, j, err := t.open(context.Background(), false)
		if err != nil {
			return nil, err
		}
		return &resumable{store: j,
			records: func() ([]*idem.Record, error) { return t.records(context.Background(), false) },
			close:   func() { j.Close(); pool.Close() }}, nil
	}
	if err := checkJournalFile(cmd, arg); err != nil {
		return nil, err
	}
	j, err := boltjournal.Open(arg, &boltjournal.Options{OpenTimeout: time.Second})
	if err != nil {
		return nil, openHint(err)
	}
	return &resumable{store: j, records: j.Records, close: func() { j.Close() }}, nil
}

func outcomeLine(o idem.Outcome) resumeLine {
	line := resumeLine{ID: boltjournal.RecordID(o.Record), OperationID: o.Record.OperationID, Key: o.Record.Key}
	var pe *idem.PendingError
	switch {
	case o.Response != nil:
		line.Result, line.Status = "settled", o.Response.StatusCode
		o.Response.Body.Close()
	case errors.Is(o.Err, idem.ErrKeyExpired):
		line.Result = "expired"
	case errors.As(o.Err, &pe):
		line.Result, line.Status = "pending", pe.LastStatus
	default:
		line.Result = "not sent"
	}
	if o.Err != nil {
		line.Error = o.Err.Error()
	}
	return line
}
