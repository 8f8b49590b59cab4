// This file holds what the bbolt journal keeps of a record beside
// journal.Record: its sequence number (its key in the file), the metadata a
// listing read it from and its body's part size, all in its journal.Ref; its
// index keys; and the form it is stored in. Its encoding, sealed or not, is
// in record_seal.go.

package boltjournal

import (
	"encoding/binary"

	"github.com/idem-go/idem/journal"
)

type (
	// Record is journal.Record.
	Record = journal.Record
	// State is journal.State.
	State = journal.State
)

const (
	StatePending = journal.StatePending
	StateSettled = journal.StateSettled
	StateExpired = journal.StateExpired
	StateFailed  = journal.StateFailed
)

// RecordID returns rec's sequence number in the journal file it was read
// from: its key there, in creation order, as `idem journal` shows it. 0 for
// a record no journal returned.
func RecordID(rec *Record) uint64 { return seqOf(rec) }

// seqOf is rec's sequence number in the journal file: its key, in creation
// order. 0 for a record not read from or written to the file yet.
func seqOf(rec *Record) uint64 { return journal.RefOf(rec).Seq }

func setSeq(rec *Record, seq uint64) {
	ref := journal.RefOf(rec)
	ref.Seq = seq
	journal.SetRef(rec, ref)
}

// listed returns the value as the file held it when a listing read rec
// (readPending), its inline body included, and the change generation the
// listing took before it read (changes.go); nil and 0 for a record not
// listed from the file. reget reads the file again only if it changed.
func listed(rec *Record) (value []byte, gen uint64) {
	ref := journal.RefOf(rec)
	return ref.Meta, ref.Version
}

func setListed(rec *Record, value []byte, gen uint64) {
	ref := journal.RefOf(rec)
	ref.Meta, ref.Version = value, gen
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
