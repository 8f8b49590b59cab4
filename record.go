// This file holds the root's names for journal.Record and its states, and
// what the bbolt journal keeps of a record beside it: its sequence number,
// its index keys and the form it is stored in. Its encoding, sealed or not,
// is in record_seal.go.

package idem

import (
	"encoding/binary"

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

// seqOf is rec's sequence number in the journal file: its key, in creation
// order. 0 for a record not read from or written to the file yet.
func seqOf(rec *Record) uint64 { return journal.RefOf(rec).Seq }

func setSeq(rec *Record, seq uint64) {
	ref := journal.RefOf(rec)
	ref.Seq = seq
	journal.SetRef(rec, ref)
}

// listedMeta is the metadata as the file held it when a listing read rec
// (pendingAfter): reget reads only the body while they are unchanged.
func listedMeta(rec *Record) []byte { return journal.RefOf(rec).Meta }

func setListed(rec *Record, meta []byte) {
	ref := journal.RefOf(rec)
	ref.Meta = meta
	journal.SetRef(rec, ref)
}

// bodySegment is, for a sealed record whose body was staged, the size of
// the parts sealed one by one (record_seal.go); 0 when the body is sealed
// whole, or not at all.
func bodySegment(rec *Record) int { return journal.RefOf(rec).Part }

func setBodySegment(rec *Record, n int) {
	ref := journal.RefOf(rec)
	ref.Part = n
	journal.SetRef(rec, ref)
}

// fingerprint and bodySum are journal.Fingerprint and journal.BodySum.
var (
	fingerprint = journal.Fingerprint
	bodySum     = journal.BodySum
)

// indexKeys are the index entries naming the record: its operation ID and a
// caller's key. A key idem minted is not indexed: nobody can look it up.
func indexKeys(r *Record) [][]byte {
	var keys [][]byte
	if r.CallerKey {
		keys = append(keys, []byte("k\x00"+r.Key))
	}
	if r.OperationID != "" {
		keys = append(keys, []byte("o\x00"+r.OperationID))
	}
	return keys
}

// stored is the record as written: a settled one without headers (its body
// is dropped too).
func stored(r *Record) *Record {
	if r.State != StateSettled {
		return r
	}
	c := *r
	c.Body, c.Header = nil, nil
	return &c
}

func idKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, id)
}

// stub is a record holding only rec's journal.Ref: enough for Store.Reload
// to find rec again, without keeping its body alive.
func stub(rec *Record) *Record {
	s := new(Record)
	journal.SetRef(s, journal.Ref{Seq: seqOf(rec)})
	return s
}
