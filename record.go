// This file holds the root's names for journal.Record and its states.

package idem

import (
	"github.com/idem-go/idem/journal"
)

// Record is one operation in the journal: journal.Record. Records returned
// by the Journal are copies; changing them changes nothing on disk.
type Record = journal.Record

// State is where an operation is in its life: journal.State.
type State = journal.State

// The states of an operation (journal/state.go holds their transitions).
const (
	// StatePending: the outcome is not known yet; Resume will send it again.
	StatePending = journal.StatePending
	// StateSettled: a final response was received.
	StateSettled = journal.StateSettled
	// StateExpired: pending for longer than KeyTTL; never re-sent blindly.
	StateExpired = journal.StateExpired
	// StateFailed: failed permanently before the server could have acted.
	StateFailed = journal.StateFailed
)

// fingerprint and bodySum are journal.Fingerprint and journal.BodySum.
var (
	fingerprint = journal.Fingerprint
	bodySum     = journal.BodySum
)

// stub is a record holding only rec's journal.Ref: enough for Store.Reload
// to find rec again, without keeping its body alive.
func stub(rec *Record) *Record {
	s := new(Record)
	journal.SetRef(s, journal.Ref{Seq: seqOf(rec)})
	return s
}

// seqOf is rec's place in its Store's order (journal.Ref): what Resume
// pages by and keeps each host's operations in order with.
func seqOf(rec *Record) uint64 { return journal.RefOf(rec).Seq }
