// This file holds the view itself: View and Entry, its JSON form, and how
// one is read from a Store.

package journalhttp

import (
	"context"
	"strings"
	"time"

	"github.com/idem-go/idem/journal"
)

// View is what the handler serves: its JSON form with ?format=json.
type View struct {
	// Journal names the journal (Options.Name); "" if unnamed.
	Journal string `json:"journal,omitempty"`
	// Time is when the view was read, by the Store's clock when it has one
	// (journal.Clock), else the local one.
	Time time.Time `json:"time"`
	// Counts counts every operation by state, whatever the filter: pending,
	// settled, expired and failed, zeros included. A Store that is not a
	// journal.Lister is counted pending only (Partial).
	Counts map[string]int `json:"counts"`
	// Partial is set when Counts and Operations cover the pending
	// operations only: the Store cannot list its finished ones.
	Partial bool `json:"partial,omitempty"`
	// OldestPending is the pending operation created first, the one
	// closest to expiring (KeyTTL counts from creation); nil if none.
	OldestPending *Entry `json:"oldest_pending,omitempty"`
	// NextAttempt is the earliest time a pending operation waits for
	// (Retry-After honoured); zero if every pending operation is due now.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// Operations are those the filter selects, pending first, then the
	// finished ones, each group in creation order, at most the limit.
	Operations []Entry `json:"operations"`
	// Truncated is set when more operations matched than the limit.
	Truncated bool `json:"truncated,omitempty"`
	// Matched is how many operations the filter selects, listed or not.
	Matched int `json:"matched"`
}

// Entry is one operation as the view shows it: the fields of `idem journal
// ls -json` that hold nothing of the request's content (see the package
// documentation). The JSON names are those of `idem journal ls -json`.
type Entry struct {
	ID          uint64 `json:"id"` // the record's sequence number in its journal (journal.Ref.Seq)
	Key         string `json:"key"`
	OperationID string `json:"op,omitempty"`
	Method      string `json:"method"`
	// URL is the request's scheme, host and path, followed by "?…" if the
	// journaled URL had a query: the query itself is never shown.
	URL          string   `json:"url"`
	Host         string   `json:"host,omitempty"`     // the request's Host override
	Location     string   `json:"location,omitempty"` // where a 307 or 308 sent it, as URL
	Dropped      []string `json:"dropped,omitempty"`  // names of sensitive headers not journaled
	DroppedQuery []string `json:"dropped_query,omitempty"`
	CallerKey    bool     `json:"caller_key,omitempty"`
	State        string   `json:"state"`
	// Attempts counts the attempts whose outcome was recorded;
	// AttemptsUncertain is set while the outcome is unknown, when more may
	// have reached the server (journal.Record.AttemptsUncertain).
	Attempts          int       `json:"attempts"`
	AttemptsUncertain bool      `json:"attempts_uncertain,omitempty"`
	Status            int       `json:"status,omitempty"`
	LastError         string    `json:"last_error,omitempty"`
	Created           time.Time `json:"created"`
	LastAttempt       time.Time `json:"last_attempt,omitzero"`
	NextAttempt       time.Time `json:"next_attempt,omitzero"`
	Updated           time.Time `json:"updated"`
	EncryptionKeyID   string    `json:"kid,omitempty"`
	Sealed            bool      `json:"sealed,omitempty"`
}

// entryOf is what the view shows of r.
func entryOf(r *journal.Record) Entry {
	return Entry{ID: journal.RefOf(r).Seq, Key: r.Key, OperationID: r.OperationID, Method: r.Method,
		URL: withoutQuery(r.URL), Host: r.Host, Location: withoutQuery(r.Location),
		Dropped: r.Dropped, DroppedQuery: r.DroppedQuery, CallerKey: r.CallerKey,
		State: r.State.String(), Attempts: r.Attempts, AttemptsUncertain: r.AttemptsUncertain(),
		Status: r.Status, LastError: r.LastError, Created: r.Created, LastAttempt: r.LastAttempt,
		NextAttempt: r.NextAttempt, Updated: r.Updated, EncryptionKeyID: r.EncryptionKeyID, Sealed: r.Sealed}
}

// withoutQuery cuts a journaled URL before its query (or a fragment, in
// journals written before fragments were left out), marking the cut.
func withoutQuery(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i] + "?…"
	}
	return u
}

// Record returns the record e shows, as far as it shows it: its Ref's Seq
// is e.ID, its state parsed back; what the view leaves out is absent. For
// tools that print a view as they print a journal (idem journal).
func (e *Entry) Record() *journal.Record {
	r := &journal.Record{Key: e.Key, OperationID: e.OperationID, Method: e.Method, URL: e.URL, Host: e.Host,
		Location: e.Location, Dropped: e.Dropped, DroppedQuery: e.DroppedQuery, CallerKey: e.CallerKey,
		State: parseState(e.State), Attempts: e.Attempts, Status: e.Status, LastError: e.LastError,
		Created: e.Created, LastAttempt: e.LastAttempt, NextAttempt: e.NextAttempt, Updated: e.Updated,
		EncryptionKeyID: e.EncryptionKeyID, Sealed: e.Sealed}
	journal.SetRef(r, journal.Ref{Seq: e.ID})
	return r
}

// states are the states a view counts, in the order it prints them.
var states = []journal.State{journal.StatePending, journal.StateSettled, journal.StateExpired, journal.StateFailed}

func parseState(s string) journal.State {
	for _, st := range states {
		if st.String() == s {
			return st
		}
	}
	return 0
}

// filter selects the operations a view lists.
type filter struct {
	states map[journal.State]bool // nil: any
	op     string                 // "": any; "p*": the prefix p
	limit  int
}

func (f *filter) match(r *journal.Record) bool {
	if f.states != nil && !f.states[r.State] {
		return false
	}
	if prefix, ok := strings.CutSuffix(f.op, "*"); ok {
		return strings.HasPrefix(r.OperationID, prefix)
	}
	return f.op == "" || r.OperationID == f.op
}

// read reads a view of s: every record through All when s is a
// journal.Lister, else the pending ones through Pending.
func read(ctx context.Context, s journal.Store, name string, f *filter) (*View, error) {
	v := &View{Journal: name, Time: now(s), Counts: make(map[string]int, len(states)), Operations: []Entry{}}
	for _, st := range states {
		v.Counts[st.String()] = 0
	}
	recs := s.Pending(ctx, 0)
	if l, ok := s.(journal.Lister); ok {
		recs = l.All(ctx)
	} else {
		v.Partial = true
	}
	for r, err := range recs {
		if err != nil {
			return nil, err
		}
		v.add(r, f)
	}
	return v, nil
}

// add counts r, and lists it if f selects it and the limit allows.
func (v *View) add(r *journal.Record, f *filter) {
	v.Counts[r.State.String()]++
	if r.State == journal.StatePending {
		if v.OldestPending == nil || r.Created.Before(v.OldestPending.Created) {
			e := entryOf(r)
			v.OldestPending = &e
		}
		if r.NextAttempt.After(v.Time) && (v.NextAttempt.IsZero() || r.NextAttempt.Before(v.NextAttempt)) {
			v.NextAttempt = r.NextAttempt
		}
	}
	if !f.match(r) {
		return
	}
	v.Matched++
	if len(v.Operations) == f.limit {
		v.Truncated = true
		return
	}
	v.Operations = append(v.Operations, entryOf(r))
}

// now is the time by s's clock, if it has one.
func now(s journal.Store) time.Time {
	if c, ok := s.(journal.Clock); ok {
		return c.Now()
	}
	return time.Now()
}
