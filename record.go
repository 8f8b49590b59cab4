// This file holds the record of an operation: the root's names for
// journal.Record and its states, and the record built from a request and
// written ahead (or handed to a Store that writes it by its own means, such
// as pgjournal's transactional outbox: Prepare).

package idem

import (
	"errors"
	"fmt"
	"net/http"

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

// Prepare returns the record RoundTrip would write ahead for req, as a new
// pending operation, without writing or sending anything. It reads and
// closes req's body. The key is the caller's (its header or WithKey) or a
// new one; the operation ID is WithOperationID's; sensitive headers and
// query parameters are left out, as RoundTrip leaves them out.
//
// It is for a Store that journals the record by other means, such as
// pgjournal's transactional outbox, which writes it inside the caller's
// database transaction; Resume, on any Transport over that Store, then
// sends it. It fails, having written nothing, with ErrInvalidRequest (also
// for a call WithoutJournal), ErrInvalidKey, ErrBodyTooLarge, the
// context's error, or Options.Identity's error.
func (t *Transport) Prepare(req *http.Request) (*Record, error) {
	t.setup()
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	_, err := t.checkCall(req)
	if err == nil && withoutJournal(req.Context()) {
		err = fmt.Errorf("%w: Prepare of a call WithoutJournal: there is nothing to journal", ErrInvalidRequest)
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	b, err := t.readBody(req)
	if err != nil {
		return nil, err
	}
	if b.tooLarge {
		b.close()
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, t.cfg.MaxBodyBytes)
	}
	c, err := t.nameCall(req, b.buf)
	if err != nil {
		return nil, err
	}
	return t.newRecord(c), nil
}

// newRecord returns the record of c's new operation, pending since now,
// bound to the call's identity or credentials.
func (t *Transport) newRecord(c *call) *Record {
	req := c.req
	u, droppedQuery := storedURL(req.URL, t.cfg.sensitiveQuery)
	host := req.Host
	if host == req.URL.Host {
		host = "" // not an override: http.NewRequest sets it to the URL's
	}
	rec := &Record{Key: c.key, CallerKey: c.hasKey, OperationID: c.opID, Method: method(req), URL: u, Host: host,
		Header: t.storedHeader(req.Header), Dropped: t.droppedHeaders(req.Header),
		DroppedQuery: droppedQuery, Body: c.buf, BodySHA256: c.sum}
	journal.Apply(rec, journal.EventCreate, journal.Change{Now: t.clock.Now()}) // a new record: always allowed
	t.bind(rec, &c.identity)
	return rec
}

// fingerprintOf is the fingerprint of req as its record would store it;
// sum is its body's bodySum.
func (t *Transport) fingerprintOf(req *http.Request, sum string) string {
	u, _ := storedURL(req.URL, t.cfg.sensitiveQuery)
	return fingerprint(method(req), u, sum)
}

// writeAheadOrFind writes the record of c's new operation, or, when a Store
// shared with other instances (a fleet's) already holds one by its name,
// written since this call looked, returns that record to go on with, as a
// second call would (existed true).
func (t *Transport) writeAheadOrFind(c *call) (rec *Record, existed bool, err error) {
	ctx := c.req.Context()
	rec = t.newRecord(c)
	werr := t.writeAhead(ctx, rec)
	if werr == nil {
		return rec, false, nil
	}
	if !errors.Is(werr, journal.ErrNameTaken) {
		return nil, false, fmt.Errorf("idem: write-ahead failed, request not sent: %w", werr)
	}
	if c.hasKey || c.opID != "" {
		found, err := t.journal.Get(ctx, c.name)
		if err != nil {
			return nil, false, err
		}
		if found != nil && journal.NameOf(found) == c.name {
			return found, true, nil
		}
	}
	// The caller's key is another operation's.
	return nil, false, fmt.Errorf("idem: write-ahead failed, request not sent: %w: %w", ErrKeyReuse, werr)
}
