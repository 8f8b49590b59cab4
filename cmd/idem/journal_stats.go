// This file holds "idem journal stats": a journal's records counted by state,
// its oldest pending operation, its earliest next attempt and its size, read
// from a journal opened read-only.

package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
)

// journalSummary is what stats prints; its JSON form is the -json output.
type journalSummary struct {
	File   string         `json:"file"`            // or a PostgreSQL journal, without password
	Bytes  int64          `json:"bytes,omitempty"` // the file's size; none for PostgreSQL
	Total  int            `json:"total"`
	States map[string]int `json:"states"` // every state, zeros included

	// The pending operation created first, if any: the one closest to
	// expiring (KeyTTL counts from creation).
	OldestPending *pendingSummary `json:"oldest_pending,omitempty"`
	// The earliest time Resume may send a pending operation (Retry-After
	// honoured); zero if every pending operation is due now.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

type pendingSummary struct {
	ID          uint64    `json:"id"`
	OperationID string    `json:"op,omitempty"`
	Key         string    `json:"key"`
	Created     time.Time `json:"created"`
	AgeSeconds  float64   `json:"age_seconds"`
}

func summarize(path string, size int64, recs []*idem.Record, now time.Time) journalSummary {
	s := journalSummary{File: path, Bytes: size, Total: len(recs), States: map[string]int{}}
	for _, st := range []idem.State{idem.StatePending, idem.StateSettled, idem.StateExpired, idem.StateFailed} {
		s.States[st.String()] = 0
	}
	for _, r := range recs {
		s.States[r.State.String()]++
		if r.State != idem.StatePending {
			continue
		}
		if s.OldestPending == nil || r.Created.Before(s.OldestPending.Created) {
			s.OldestPending = &pendingSummary{ID: boltjournal.RecordID(r), OperationID: r.OperationID, Key: r.Key,
				Created: r.Created.UTC(), AgeSeconds: now.Sub(r.Created).Seconds()}
		}
		if r.NextAttempt.After(now) && (s.NextAttempt.IsZero() || r.NextAttempt.Before(s.NextAttempt)) {
			s.NextAttempt = r.NextAttempt.UTC()
		}
	}
	return s
}

// readSummary reads what stats prints: from a view, its own counts, which
// cover every operation whatever it lists.
func readSummary(cmd, file string) (journalSummary, error) {
	if isView(file) {
		v, err := fetchView(cmd, file, url.Values{"limit": {"1"}})
		if err != nil {
			return journalSummary{}, err
		}
		return viewSummary(file, v), nil
	}
	recs, err := readRecords(cmd, file, false)
	if err != nil {
		return journalSummary{}, err
	}
	var size int64 // a PostgreSQL journal's tables are shared: no size of its own
	if !isPostgres(file) {
		fi, err := os.Stat(file)
		if err != nil {
			return journalSummary{}, err
		}
		size = fi.Size()
	}
	return summarize(displayName(file), size, recs, time.Now()), nil
}

func journalStats(args []string) error {
	fs := newFlags("journal stats", "[-json] FILE", "Counts a journal's records by state, and prints its oldest pending operation, the\nearliest next attempt and the file's size. Opens the file read-only.")
	asJSON := fs.Bool("json", false, "print one JSON object")
	file, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	s, err := readSummary(fs.Name(), file)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	if isPostgres(file) || isView(file) {
		fmt.Printf("journal       %s\n", s.File)
	} else {
		fmt.Printf("file          %s (%d bytes)\n", s.File, s.Bytes)
	}
	fmt.Printf("records       %d: %d pending, %d settled, %d expired, %d failed\n", s.Total,
		s.States["pending"], s.States["settled"], s.States["expired"], s.States["failed"])
	if p := s.OldestPending; p != nil {
		fmt.Printf("oldest pending %s (id %d, key %s), created %s, %s ago\n", orDash(p.OperationID), p.ID, p.Key,
			p.Created.Format(time.RFC3339), time.Duration(p.AgeSeconds*float64(time.Second)).Round(time.Second))
	}
	switch {
	case s.States["pending"] == 0:
	case s.NextAttempt.IsZero():
		fmt.Println("next attempt  now: every pending operation is due")
	default:
		fmt.Printf("next attempt  %s\n", s.NextAttempt.Format(time.RFC3339))
	}
	return nil
}
