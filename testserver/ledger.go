// ledger.go keeps the Ledger: what the server did, per business reference, so a test can
// prove that every payment happened exactly once.

package testserver

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Ledger is a snapshot of what the server did. Counters count answers the server decided on,
// whether or not the network then delivered them (a replay lost to FaultLostResponse still
// counts as a replay). It is served as JSON at GET /_ledger with the field names in the tags.
//
// A Ledger is a plain value owned by whoever holds it; Server.Ledger returns a fresh copy.
type Ledger struct {
	// Effects maps a business reference to the number of payments created for it. Two
	// payments for one reference under different keys count 2: a duplicate.
	Effects map[string]int `json:"effects"`
	// Requests counts POST /payments requests received, faulted or not.
	Requests int `json:"requests"`
	// Replays counts answers served from a stored result (Idempotent-Replayed: true).
	Replays int `json:"replays"`
	// InProgress counts 409 answers for a key still in progress.
	InProgress int `json:"in_progress"`
	// Mismatches counts 422 answers: a key reused with a different fingerprint.
	Mismatches int `json:"mismatches"`
	// MissingKey counts 400 answers for a missing key when Options.RequireKey is set.
	MissingKey int `json:"missing_key"`
	// Faults counts the injected faults that acted, by FaultKind name; status
	// faults by status and Retry-After form, e.g. "503", "429 Retry-After=date".
	Faults map[string]int `json:"faults"`
}

// Payments returns the number of payments created, over all references.
func (l Ledger) Payments() int {
	n := 0
	for _, c := range l.Effects {
		n += c
	}
	return n
}

// Duplicates returns the references with two or more effects, sorted.
func (l Ledger) Duplicates() []string {
	var dups []string
	for ref, n := range l.Effects {
		if n >= 2 {
			dups = append(dups, ref)
		}
	}
	slices.Sort(dups)
	return dups
}

// Check reports whether the run was exactly-once: every reference in refs has exactly one
// effect and no reference at all has two or more. References with one effect that are not in
// refs are allowed. The error is a *CheckError naming the offenders; it unwraps to
// ErrNotExactlyOnce.
func (l Ledger) Check(refs []string) error {
	var missing []string
	for _, ref := range refs {
		if l.Effects[ref] == 0 {
			missing = append(missing, ref)
		}
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	dups := l.Duplicates()
	if len(missing) == 0 && len(dups) == 0 {
		return nil
	}
	return &CheckError{Missing: missing, Duplicated: dups}
}

// Summary returns a short multi-line report for people, e.g. at the end of "idem serve".
func (l Ledger) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests     %d\n", l.Requests)
	fmt.Fprintf(&b, "payments     %d for %d references\n", l.Payments(), len(l.Effects))
	fmt.Fprintf(&b, "duplicates   %d\n", len(l.Duplicates()))
	fmt.Fprintf(&b, "replays      %d\n", l.Replays)
	fmt.Fprintf(&b, "in progress  %d (409)\n", l.InProgress)
	fmt.Fprintf(&b, "mismatches   %d (422)\n", l.Mismatches)
	fmt.Fprintf(&b, "missing key  %d (400)\n", l.MissingKey)
	var faults []string
	for _, kind := range slices.Sorted(maps.Keys(l.Faults)) {
		faults = append(faults, fmt.Sprintf("%s=%d", kind, l.Faults[kind]))
	}
	if len(faults) == 0 {
		faults = []string{"none"}
	}
	fmt.Fprintf(&b, "faults       %s\n", strings.Join(faults, " "))
	return b.String()
}

// recorder is the server's live Ledger. It is safe for concurrent use.
type recorder struct {
	mu sync.Mutex
	l  Ledger
}

func newRecorder() *recorder {
	return &recorder{l: Ledger{Effects: map[string]int{}, Faults: map[string]int{}}}
}

// update changes the ledger under the lock.
func (r *recorder) update(fn func(l *Ledger)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(&r.l)
}

// fault counts one injected fault that acted.
func (r *recorder) fault(f Fault) {
	r.update(func(l *Ledger) { l.Faults[f.ledgerName()]++ })
}

// snapshot returns a deep copy.
func (r *recorder) snapshot() Ledger {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.l
	l.Effects = maps.Clone(r.l.Effects)
	l.Faults = maps.Clone(r.l.Faults)
	return l
}
