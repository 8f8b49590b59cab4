// ledger.go keeps the Ledger: what the server did, per business reference, so a test can
// prove that every payment happened exactly once.

package testserver

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
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
	// Replays counts answers served from a stored result (Idempotent-Replayed: true),
	// including those Recover rebuilt for a stuck key.
	Replays int `json:"replays"`
	// InProgress counts 409 answers for a key still in progress (or stuck in progress,
	// its holder's lease lapsed, until Recover decides).
	InProgress int `json:"in_progress"`
	// Mismatches counts 422 answers: a key reused with a different fingerprint.
	Mismatches int `json:"mismatches"`
	// MissingKey counts 400 answers for a missing key header when Options.RequireKey is
	// set (an empty or malformed key is a 400 too, but not counted here).
	MissingKey int `json:"missing_key"`
	// StoreUnavailable counts 503 answers the idempotency middleware gave because its Store
	// failed (a claim, a take-over): the payment did not run for them.
	StoreUnavailable int `json:"store_unavailable"`
	// StoreErrors counts the Store failures the middleware reported (its Observer's
	// StoreError): one for each StoreUnavailable answer. A completion or release that
	// failed after the handler ran is counted in StoreCalls, for it is repeated.
	StoreErrors int `json:"store_errors"`
	// Faults counts the injected faults that acted, by FaultKind name; status
	// faults by status and Retry-After form, e.g. "503", "429 Retry-After=date".
	Faults map[string]int `json:"faults"`
	// StoreCalls counts the middleware's idempotency-store calls that got no answer (so
	// may have happened), by call ("uncertain claim"), and how each ended once known, by
	// call and outcome ("claim released", "complete landed", "complete gave-up").
	StoreCalls map[string]int `json:"store_calls"`
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

// Summary returns a short multi-line report for people, e.g. at the end of "idem serve":
// one counter a line, in words, and one line per kind of fault injected.
func (l Ledger) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests received            %d\n", l.Requests)
	fmt.Fprintf(&b, "payments created             %d for %d references\n", l.Payments(), len(l.Effects))
	fmt.Fprintf(&b, "charged twice or more        %d references\n", len(l.Duplicates()))
	fmt.Fprintf(&b, "replayed a stored answer     %d\n", l.Replays)
	fmt.Fprintf(&b, "409 key still in progress    %d\n", l.InProgress)
	fmt.Fprintf(&b, "422 key reused, other body   %d\n", l.Mismatches)
	fmt.Fprintf(&b, "400 key missing              %d\n", l.MissingKey)
	total := 0
	for _, n := range l.Faults {
		total += n
	}
	fmt.Fprintf(&b, "faults injected              %d\n", total)
	for _, kind := range slices.Sorted(maps.Keys(l.Faults)) {
		fmt.Fprintf(&b, "  %5d  %s\n", l.Faults[kind], DescribeFault(kind))
	}
	return b.String()
}

// DescribeFault says in words what a fault did, given its name as Ledger.Faults counts
// it: "lost" is "charged, then the response was lost", "503 Retry-After=date" is
// "503 Service Unavailable, Retry-After as a date".
func DescribeFault(name string) string {
	switch name {
	case "lost":
		return "charged, then the response was lost"
	case "slow":
		return "charged, answered after the client's timeout"
	case "drop":
		return "connection dropped before charging"
	case "reset":
		return "connection reset while reading the request"
	case "hold":
		return "held in progress for a while"
	}
	code, form, _ := strings.Cut(name, " ")
	status, err := strconv.Atoi(code)
	if err != nil {
		return name
	}
	words := code + " " + http.StatusText(status)
	switch form {
	case "Retry-After=seconds":
		words += ", Retry-After in seconds"
	case "Retry-After=date":
		words += ", Retry-After as a date"
	case "Retry-After=other":
		words += ", unreadable Retry-After"
	}
	return words
}

// recorder is the server's live Ledger. It is safe for concurrent use.
type recorder struct {
	mu sync.Mutex
	l  Ledger
}

func newRecorder() *recorder {
	return &recorder{l: Ledger{Effects: map[string]int{}, Faults: map[string]int{}, StoreCalls: map[string]int{}}}
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
	l.StoreCalls = maps.Clone(r.l.StoreCalls)
	return l
}
