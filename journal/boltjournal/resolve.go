// This file holds the ways out for an operation that no call or Resume will
// finish: an operator resolves it by hand once reconciled (Resolve), or gives
// it up (Discard); and a sealed record that cannot be opened expires once
// past KeyTTL (expireUnopened), rather than being reported on every pass for
// ever. Each change rewrites only the record's readable metadata: a sealed
// part stays as it is, so it works without the record's key.

package boltjournal

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
)

// Resolve marks a pending or expired operation settled with status, after an
// operator reconciled it with the server (say GET /payments?reference=...
// found the payment: status 201). It is then what a final response would
// have left: Resume skips it, a call with its operation ID within KeyTTL of
// Created is sent again with its key (the server replays its stored
// response), and later gets an *AlreadySettledError carrying status. Its body
// is deleted. The change is committed, with fsync, before Resolve returns;
// it returns the record as now stored, without its body.
//
// status must be a final status code, 200 to 599 (RFC 9110 section 15). It
// returns an error matching journal.ErrNotFound if the journal has no such
// operation, journal.ErrBusy if a call or Resume in this process is sending
// it (try again once it returns: it may settle by itself), journal.ErrFinal
// if it is settled or failed already, and journal.ErrInvalidOptions for a journal
// opened read-only. A sealed record is resolved without its key: its sealed
// part is kept as it is.
//
// Through an idem.Client, prefer Client.Resolve: it also tells the
// Observer's pending gauge.
func (j *Journal) Resolve(ref journal.Name, status int) (*Record, error) {
	rec, _, err := j.resolve(ref, status)
	return rec, err
}

// Discard gives up a pending operation for good, after an operator decided it
// must never be sent (or sent again): it becomes expired, the state of an
// operation that is never re-sent blindly, with LastError "idem: discarded by
// hand" and reason, if any, after it. Resume skips it, and a call with its
// operation ID gets ErrKeyExpired, with nothing sent. Its body is deleted; the
// record is kept for Retention, as every expired one is. The change is
// committed, with fsync, before Discard returns; it returns the record as now
// stored, without its body.
//
// It returns the errors Resolve does, and journal.ErrFinal for an operation
// settled, failed or expired already (there is nothing to give up).
//
// Through an idem.Client, prefer Client.Discard: it also tells the
// Observer's pending gauge.
func (j *Journal) Discard(ref journal.Name, reason string) (*Record, error) {
	rec, _, err := j.discard(ref, reason)
	return rec, err
}

// ResolveFrom is Resolve, which also returns the state the operation had:
// what a Client needs to keep its Observer's pending gauge.
func (j *Journal) ResolveFrom(ref journal.Name, status int) (*Record, State, error) {
	return j.resolve(ref, status)
}

// DiscardFrom is Discard, which also returns the state the operation had.
func (j *Journal) DiscardFrom(ref journal.Name, reason string) (*Record, State, error) {
	return j.discard(ref, reason)
}

func (j *Journal) resolve(ref journal.Name, status int) (*Record, State, error) {
	if status < 200 || status > 599 {
		return nil, 0, fmt.Errorf("idem: Resolve %s: status %d is not a final status (200-599)", ref, status)
	}
	return j.byHand(ref, "Resolve", func(rec *Record) error {
		return byHandChange(rec, journal.EventResolve, journal.Change{Now: j.now(), Status: status})
	})
}

func (j *Journal) discard(ref journal.Name, reason string) (*Record, State, error) {
	return j.byHand(ref, "Discard", func(rec *Record) error {
		return byHandChange(rec, journal.EventDiscard, journal.Change{Now: j.now(), Error: reason})
	})
}

// byHandChange moves rec through e, or says, with journal.ErrFinal, that
// its state allows no such change.
func byHandChange(rec *Record, e journal.Event, c journal.Change) error {
	if _, err := journal.Apply(rec, e, c); err != nil {
		return fmt.Errorf("%w: it is %s", journal.ErrFinal, rec.State)
	}
	return nil
}

// byHand applies change to the operation ref names, holding its lock so
// that no call or Resume in this process sends it meanwhile, and deletes its
// body. It returns the record as stored and the state it had.
func (j *Journal) byHand(ref journal.Name, verb string, change func(*Record) error) (*Record, State, error) {
	fail := func(err error) (*Record, State, error) {
		return nil, 0, fmt.Errorf("idem: %s %s in %s: %w", verb, ref, j.path, err)
	}
	if (ref.OperationID == "") == (ref.Key == "") {
		return fail(errors.New("name it by operation ID or by key, one of the two"))
	}
	if j.readOnly {
		return fail(fmt.Errorf("%w: the journal is open read-only", journal.ErrInvalidOptions))
	}
	var found *Record
	err := j.readFlushed(func(tx *bolt.Tx) (err error) { // settled records owed written first (history.go)
		found, err = j.findRef(tx, ref)
		return err
	})
	if err != nil {
		return fail(err)
	}
	if found == nil {
		return fail(journal.ErrNotFound)
	}
	name := journal.NameOf(found)
	if !j.ops.TryClaim(name) {
		return fail(journal.ErrBusy)
	}
	defer j.ops.Release(name)
	var from State
	rec, err := j.restate(seqOf(found), true, func(rec *Record) error {
		if rec.Key != found.Key { // record IDs are never reused: a damaged file
			return fmt.Errorf("%w: record %d changed its key", journal.ErrCorrupt, seqOf(rec))
		}
		from = rec.State
		return change(rec)
	})
	if err != nil {
		return fail(err)
	}
	return rec, from, nil
}

// findRef returns the readable metadata of the record ref names in tx, or
// nil. A key idem minted is not in the index: it is looked for among the
// pending records, then the finished ones.
func (j *Journal) findRef(tx *bolt.Tx, ref journal.Name) (*Record, error) {
	indexKey := "o\x00" + ref.OperationID
	if ref.OperationID == "" {
		indexKey = "k\x00" + ref.Key
	}
	if id := tx.Bucket(bucketIndex).Get([]byte(indexKey)); id != nil {
		if len(id) != 8 {
			return nil, fmt.Errorf("%w: %s: bad index entry %x", journal.ErrCorrupt, j.path, id)
		}
		s, _, err := j.plainTx(tx, id)
		if s == nil {
			return nil, err
		}
		return s.Record, err
	}
	if ref.Key == "" {
		return nil, nil
	}
	for _, name := range [][]byte{bucketPending, bucketDone} {
		c := tx.Bucket(name).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			rec, err := decodePlain(v)
			if err != nil || len(k) != 8 {
				return nil, fmt.Errorf("%w: %s: record %x: %v", journal.ErrCorrupt, j.path, k, err)
			}
			if rec.Key == ref.Key {
				setSeq(rec, binary.BigEndian.Uint64(k))
				return rec, nil
			}
		}
	}
	return nil, nil
}

// plainTx reads record id's stored metadata with its sealed part, if any,
// left closed, and whether the pending bucket holds it (else the done one);
// nil if neither does.
func (j *Journal) plainTx(tx *bolt.Tx, id []byte) (s *storedRecord, inPending bool, err error) {
	v := tx.Bucket(bucketPending).Get(id)
	inPending = v != nil
	if v == nil {
		v = tx.Bucket(bucketDone).Get(id)
	}
	if v == nil {
		return nil, false, nil
	}
	st, err := unmarshalStored(v)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: record %x: %w", journal.ErrCorrupt, j.path, id, err)
	}
	setSeq(st.Record, binary.BigEndian.Uint64(id))
	st.Record.Sealed = st.Record.EncryptionKeyID != ""
	return &st, inPending, nil
}

// restate changes record id's readable metadata by change, in one fsynced
// commit, and moves it to the bucket its new state belongs in. A sealed
// part is written back as it was (the journal may lack its key); a settled
// plaintext record loses its headers, as Record.stored has it. With
// dropBody, or once settled, the body is deleted. The caller holds the
// operation's lock: deferred changes made before are committed first, so
// none lands on top.
// It returns the record as stored, without its body.
func (j *Journal) restate(id uint64, dropBody bool, change func(*Record) error) (*Record, error) {
	if err := j.flush(); err != nil {
		return nil, err
	}
	var out *Record
	var newest int64 // the newest time written to the file
	j.changes.begin(id)
	defer j.changes.end(id)
	err := j.update(func(tx *bolt.Tx) error {
		key := idKey(id)
		s, wasPending, err := j.plainTx(tx, key)
		if err != nil {
			return err
		}
		if s == nil {
			return journal.ErrNotFound
		}
		rec := s.Record
		rec.Updated = j.now() // change may set its own clock's time
		if err := change(rec); err != nil {
			return err
		}
		if rec.State == StateSettled {
			rec.Header = nil
		}
		data, err := appendBinary(rec, make([]byte, 0, 256+len(s.Box)), s.Box)
		if err != nil {
			return err
		}
		pending, done := tx.Bucket(bucketPending), tx.Bucket(bucketDone)
		old := pending.Get(key)
		if !wasPending {
			old = done.Get(key)
		}
		drop := dropBody || rec.State == StateSettled
		inline := hasInlineBody(old)
		if !drop {
			data = keepBody(data, old) // inline.go; before a delete frees old's page
		}
		to := done
		if rec.State == StatePending {
			to = pending
		}
		switch {
		case wasPending && to == done:
			err = pending.Delete(key)
		case !wasPending && to == pending:
			err = done.Delete(key)
		}
		if err != nil {
			return err
		}
		if err := to.Put(key, data); err != nil {
			return err
		}
		if newest, err = j.raiseWritten(tx, rec.Written()); err != nil {
			return err
		}
		if drop && !inline {
			if err := deleteBody(tx.Bucket(bucketBodies), key); err != nil {
				return err
			}
		}
		cp := *rec
		out = &cp
		return nil
	})
	if err == nil {
		j.sawWritten(out.Written())
		j.noteFileWritten(newest)
	}
	return out, err
}
