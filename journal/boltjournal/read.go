// This file holds the Journal's reads (journal.go holds the file and its
// layout, commit.go its writes, prune.go its pruning). Every read sees the
// newest state, including state changes deferred but not yet committed.

package boltjournal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
)

// Lookup returns the record of the operation with the given operation ID, or
// nil if the journal has none (never had, or pruned it). For a sealed record
// the journal cannot open it returns an error matching journal.ErrUnknownEncryptionKey or
// journal.ErrDecrypt; for a record not yet settled whose body does not match its
// BodySHA256 (a damaged file), journal.ErrCorrupt.
func (j *Journal) Lookup(operationID string) (*Record, error) {
	return j.find("o\x00" + operationID)
}

// find returns the record an index key names, with its body, or nil.
func (j *Journal) find(indexKey string) (*Record, error) {
	var id []byte
	err := j.view(func(tx *bolt.Tx) error {
		id = bytes.Clone(tx.Bucket(bucketIndex).Get([]byte(indexKey)))
		return nil
	})
	if err != nil || id == nil {
		return nil, err
	}
	if len(id) != 8 {
		return nil, fmt.Errorf("%w: %s: bad index entry %x", journal.ErrCorrupt, j.path, id)
	}
	rec, err := j.get(binary.BigEndian.Uint64(id))
	if err == nil && rec == nil {
		err = fmt.Errorf("%w: %s: index names a missing record", journal.ErrCorrupt, j.path)
	}
	return rec, err
}

// get returns record id with its body, or nil if it is gone. The overlay of
// deferred changes is read first: a change leaves it only once its commit is
// visible, so a read of the file begun after finding nothing there sees it.
// (Reading the file first could miss a change committed in between.)
func (j *Journal) get(id uint64) (rec *Record, err error) {
	// Twice: a settle that only deleted the pending record (history.go)
	// leaves the file without it until its settled record is written, while
	// the overlay holds it. A settle committed between the overlay's read
	// and the file's is in the overlay at the second look, or already in the
	// file at the second read.
	for range 2 {
		if rec := j.unsaved(id); rec != nil {
			return rec, nil
		}
		err = j.view(func(tx *bolt.Tx) error {
			rec, err = j.load(tx, idKey(id))
			return err
		})
		if err != nil || rec != nil {
			return rec, err
		}
	}
	return nil, nil
}

// load reads record id, body included, from whichever bucket holds it, and
// refuses (journal.ErrCorrupt) one not yet settled whose body does not hash
// to its BodySHA256: it is about to be sent. A
// sealed record it cannot open is an error (journal.ErrUnknownEncryptionKey, journal.ErrDecrypt):
// whoever asks for one record means to use it.
func (j *Journal) load(tx *bolt.Tx, id []byte) (*Record, error) {
	v := tx.Bucket(bucketPending).Get(id)
	if v == nil {
		v = tx.Bucket(bucketDone).Get(id)
	}
	if v == nil {
		return nil, nil
	}
	rec, sealErr, err := j.decode(tx, id, v, true)
	if err == nil {
		err = sealErr
	}
	if err == nil {
		err = j.checkBody(rec)
	}
	return rec, err
}

// checkBody refuses a record not yet settled whose body does not hash to its
// BodySHA256: a lost or altered body entry, or a sealed record stripped of
// its seal. Sending it would put other bytes under the operation's key. An
// expired record without a body was discarded (Journal.Discard): it is
// never sent.
func (j *Journal) checkBody(rec *Record) error {
	if rec.State == StateSettled || rec.State == StateExpired && len(rec.Body) == 0 || rec.BodyMatches() {
		return nil
	}
	return fmt.Errorf("%w: %s: record %d (operation %q): body does not match its SHA-256",
		journal.ErrCorrupt, j.path, seqOf(rec), rec.OperationID)
}

// reget is get for a record a listing returned (readPending). Resume reads
// every record twice, listing then sending, and decoding is most of a read.
// While the change marks (changes.go) show no change to a record of its slot
// under way or ended since the listing took its generation, the listing's
// copy of its value stands: a body stored inline is taken from it, and
// nothing is read. Otherwise, while the file holds the metadata it was
// listed from, only the body is read; the metadata is decoded again only if
// it changed. The listed record's fields stand for the metadata: a caller
// that changed them without an Update gets its changes back (Resume changes
// a record only after this read).
func (j *Journal) reget(l *Record) (*Record, error) {
	value, gen := listed(l)
	if value == nil || l.Sealed {
		return j.get(seqOf(l)) // reports why it is sealed
	}
	listedMeta, listedBody, listedInline, _ := splitInline(value)
	if listedInline && !j.closed.Load() && j.changes.unchanged(seqOf(l), gen) {
		// The listed value is the listing's own copy, out of the file, so
		// the body is handed out without another. Only l's hidden Ref
		// still reaches it, and Resume replaces l with what this returns;
		// a body changed since fails checkBody on another Reload of l.
		return j.fromListed(l, listedBody[:len(listedBody):len(listedBody)])
	}
	if rec := j.unsaved(seqOf(l)); rec != nil {
		return rec, nil
	}
	var rec *Record
	err := j.view(func(tx *bolt.Tx) (err error) {
		id := idKey(seqOf(l))
		meta, body, inline, _ := splitInline(tx.Bucket(bucketPending).Get(id))
		if !bytes.Equal(meta, listedMeta) {
			rec, err = j.load(tx, id)
			return err
		}
		if inline {
			body = bytes.Clone(body)
		} else {
			body = getBody(tx.Bucket(bucketBodies), id)
		}
		rec, err = j.fromListed(l, body)
		return err
	})
	if err != nil {
		return nil, err
	}
	if rec == nil { // settled since the overlay was read, perhaps: get looks twice
		return j.get(seqOf(l))
	}
	return rec, nil
}

// fromListed returns a copy of l, a record listed from metadata still
// current, with body, its body as stored (not a transaction's memory).
func (j *Journal) fromListed(l *Record, body []byte) (*Record, error) {
	// The listed record's fields are what the file holds; its maps and
	// slices are the caller's, so the copy gets its own.
	cp := *l
	cp.Header = l.Header.Clone()
	cp.Dropped, cp.DroppedQuery = slices.Clone(l.Dropped), slices.Clone(l.DroppedQuery)
	setListed(&cp, nil, 0)
	if err := j.keyring.openBody(&cp, body); err != nil {
		return nil, fmt.Errorf("idem: journal %s: record %d (operation %q): %w", j.path, seqOf(&cp), cp.OperationID, err)
	}
	if err := j.checkBody(&cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// decode reads a record's metadata and, withBody, its body, copied out of
// the transaction's memory (getBody). A sealed record it cannot open
// comes back Sealed, with the reason in sealErr: listings show it rather
// than fail.
func (j *Journal) decode(tx *bolt.Tx, id, meta []byte, withBody bool) (rec *Record, sealErr, err error) {
	if len(id) != 8 {
		return nil, nil, fmt.Errorf("%w: %s: bad record key %x", journal.ErrCorrupt, j.path, id)
	}
	_, body, inline, _ := splitInline(meta)
	switch {
	case !withBody:
		body = nil
	case inline:
		body = bytes.Clone(body) // not the transaction's memory
	default:
		body = getBody(tx.Bucket(bucketBodies), id)
	}
	rec, sealErr, err = j.keyring.decodeStored(meta, body)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: record %x: %w", journal.ErrCorrupt, j.path, id, err)
	}
	setSeq(rec, binary.BigEndian.Uint64(id))
	if sealErr != nil {
		sealErr = fmt.Errorf("idem: journal %s: record %d (operation %q): %w", j.path, seqOf(rec), rec.OperationID, sealErr)
	}
	return rec, sealErr, nil
}

// Records returns every record, bodies included: pending ones first, then the
// settled, failed and expired ones kept for Retention, each group oldest
// first. It commits deferred state changes first, and reads both groups in
// one transaction, so what it lists is one consistent state of the file;
// commits wait while it reads (readFlushed), so it is for inspection, not
// for a busy path. A sealed record the journal cannot open is listed
// without its sealed part (see Record.Sealed); Lookup tells why.
func (j *Journal) Records() ([]*Record, error) {
	var recs []*Record
	err := j.readFlushed(func(tx *bolt.Tx) error {
		recs = recs[:0]
		for _, name := range [][]byte{bucketPending, bucketDone} {
			err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				rec, _, err := j.decode(tx, k, v, true)
				recs = append(recs, rec)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// pendingPage is how many pending records a listing holds at once, and
// pendingVisit how many a read transaction passes over at most: a listing
// whose pick skips most records keeps its transactions short all the same.
const (
	pendingPage  = 256
	pendingVisit = 16 * pendingPage
)

// pendingSeqAfter yields the pending records with an ID above after, without
// their bodies, oldest first, reading a page at a time: memory stays bounded
// however many are pending, and no read transaction is open while the caller
// works. A record is decoded when it is yielded, so a caller that stops early
// (Resume, once its queue is full) decodes no more than it took. pick, if
// not nil, judges each record by its target as it is read
// (journal.Picker). A read error ends the sequence and is stored in *errp.
func (j *Journal) pendingSeqAfter(after uint64, pick func(uint64, []byte) journal.Pick, errp *error) iter.Seq[*Record] {
	return func(yield func(*Record) bool) {
		for {
			page, gen, next, err := j.readPending(after, pendingPage, pick)
			if err != nil {
				*errp = err
				return
			}
			for _, l := range page {
				rec, err := j.listedRecord(l, gen)
				if err != nil {
					*errp = err
					return
				}
				if !yield(rec) {
					return
				}
			}
			if next == 0 {
				return
			}
			after = next
		}
	}
}

// pageEntry is a pending record as a listing read it, not yet decoded.
type pageEntry struct {
	id uint64
	// value is the stored value, its inline body included, copied out of
	// the transaction: the record keeps it for reget, which sends the body
	// from it while the record is unchanged. Each has its own: a record
	// Resume queues keeps no other record's alive.
	value []byte
	d     *deferredWrite // a deferred change that stands in for it, or nil
}

// readPending reads at most n pending records with an ID above after, in ID
// order: a page of a listing, the change generation taken before the read
// (changes.go), and the ID after which the next page starts (0: the listing
// is over). It reads the newest state: a deferred change (deferred.go)
// stands in for what the file holds, and is taken before the file is read,
// so that one committed meanwhile is seen in the file. pick, if not nil,
// judges each record the file holds by its target before it is copied.
func (j *Journal) readPending(after uint64, n int, pick func(uint64, []byte) journal.Pick) (page []pageEntry, gen, next uint64, _ error) {
	gen = j.changes.now()
	changed := j.unsavedWrites()
	err := j.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPending).Cursor()
		visited := 0
		for k, v := c.Seek(idKey(after + 1)); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				return fmt.Errorf("%w: %s: bad record key %x", journal.ErrCorrupt, j.path, k)
			}
			id := binary.BigEndian.Uint64(k)
			if len(page) == n || visited == pendingVisit {
				next = id - 1
				return nil
			}
			visited++
			if d := changed[id]; d != nil {
				if d.state == StatePending { // the change stands in for the file's value
					page = append(page, pageEntry{id: id, d: d})
				}
				continue // else settled, or given up for good, since: not listed
			}
			if pick != nil {
				if target, ok := peekTarget(v); ok {
					switch pick(id, target) {
					case journal.Skip:
						continue
					case journal.Stop:
						return nil
					}
				}
			}
			page = append(page, pageEntry{id: id, value: bytes.Clone(v)})
		}
		return nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	return page, gen, next, nil
}

// listedRecord decodes a record a listing read, without its body, and notes
// the value it was read from and the generation gen taken before (reget).
func (j *Journal) listedRecord(l pageEntry, gen uint64) (*Record, error) {
	if l.d != nil {
		rec := deepCopy(l.d.rec) // a pending change keeps its record, which stays the journal's
		rec.Body = nil
		setListed(rec, l.d.data, 0) // the file may not hold it yet
		return rec, nil
	}
	rec, _, err := j.keyring.decodeStored(l.value, nil) // Resume reads it again, and reports why it is sealed
	if err != nil {
		return nil, fmt.Errorf("%w: %s: record %x: %w", journal.ErrCorrupt, j.path, idKey(l.id), err)
	}
	setSeq(rec, l.id)
	setListed(rec, l.value, gen)
	return rec, nil
}
