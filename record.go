// This file holds the record of an operation and the journaled path of
// RoundTrip: roundTripJournaled and its steps, in the order they run (the
// first, nameCall, builds the call from its request: request.go), and the
// crash points a test can stop an operation at.

package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

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

var bodySum = journal.BodySum

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

// call is a journaled call on its way to its operation's record.
type call struct {
	req      *http.Request
	buf      []byte
	sum      string          // bodySum(buf)
	key      string          // the caller's key, or one minted for a new operation
	hasKey   bool            // the key is the caller's
	opID     string          // WithOperationID, or ""
	name     journal.Name    // the operation's name in the journal: its ID, else its key
	identity binding         // who makes the call
	fresh    *Record         // the record a new operation gets, written ahead unless one is found
	rec      *Record         // the operation's record, once found or written
	existed  bool            // rec was in the journal before this call
	expired  bool            // past KeyTTL, and a Reconciler will say whether it happened
	held     [2]journal.Name // the names hold claimed, released by unhold
	nHeld    int

	limits    limits     // the call's attempt limits
	reconcile Reconciler // the call's, or nil
}

// roundTripJournaled runs a journaled call as a list of steps: name the
// operation, hold it against concurrent calls, find or write its record,
// check this call may run it, then run it.
func (t *Transport) roundTripJournaled(req *http.Request, buf []byte, co *callOptions) (*http.Response, error) {
	if t.journal == nil {
		return nil, ErrNoJournal
	}
	c, err := t.nameCall(req, buf, co)
	if err != nil {
		return nil, err
	}
	err = t.hold(c)
	defer t.unhold(c)
	if err != nil {
		return nil, err
	}
	if err := req.Context().Err(); err != nil {
		return nil, err // nothing written, nothing sent
	}
	if err := t.findOrWriteAhead(c); err != nil {
		return nil, err
	}
	if err := t.admitCall(c); err != nil {
		return nil, err
	}
	o, err := t.prepareSend(c)
	if err != nil {
		return nil, err
	}
	return t.run(req.Context(), o)
}

// hold makes calls for one operation run one at a time, the second finding
// the first's record, so both share one key and one server-side effect. A
// record found by the caller's key that belongs to an operation ID is held
// under that name too, the one Resume takes, and read again. unhold releases
// what hold took, whatever it returned.
func (t *Transport) hold(c *call) (err error) {
	ctx := c.req.Context()
	if err := t.claim(c, c.name); err != nil {
		return err
	}
	if !c.hasKey && c.opID == "" {
		return nil // a key minted just now cannot be in the journal
	}
	if c.rec, err = t.journal.Get(ctx, c.name); err != nil || c.rec == nil || journal.NameOf(c.rec) == c.name {
		return err
	}
	if err := t.claim(c, journal.NameOf(c.rec)); err != nil {
		return err
	}
	c.rec, err = t.journal.Get(ctx, c.name)
	return err
}

// claim takes the journal's claim on name for c.
func (t *Transport) claim(c *call, name journal.Name) error {
	if err := t.journal.Claim(c.req.Context(), name); err != nil {
		return err
	}
	c.held[c.nHeld] = name
	c.nHeld++
	return nil
}

// unhold releases the claims hold took.
func (t *Transport) unhold(c *call) {
	for _, n := range c.held[:c.nHeld] {
		t.journal.Release(n)
	}
}

// findOrWriteAhead writes a new operation's record before anything is sent,
// unless it was found in the journal or another instance wrote it meanwhile.
func (t *Transport) findOrWriteAhead(c *call) error {
	if c.existed = c.rec != nil; c.existed {
		return nil
	}
	var err error
	c.rec, c.existed, err = t.writeAheadOrFind(c)
	if err == nil && !c.existed {
		t.crash(crashWriteAhead)
	}
	return err
}

// writeAheadOrFind writes the record of c's new operation or, when a Store
// shared by a fleet got one by its name since this call looked, returns that
// one to go on with, as a second call would (existed true).
func (t *Transport) writeAheadOrFind(c *call) (rec *Record, existed bool, err error) {
	ctx := c.req.Context()
	rec = c.fresh
	journal.Apply(rec, journal.EventCreate, journal.Change{Now: t.clock.Now()}) // a new record: always allowed
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

// writeAhead commits a new record before anything is sent, and tells the
// Observer how long the commit took.
func (t *Transport) writeAhead(ctx context.Context, rec *Record) error {
	start := time.Now() // commit latency is wall time, whatever clock drives retries
	err := t.journal.Create(ctx, rec)
	t.cfg.observer.WriteAhead(ctx, time.Since(start), err)
	if err == nil {
		t.stateChanged(0, StatePending)
	}
	return err
}

// admitCall checks that a call may run an operation already in the journal
// (identity, fingerprint, state) and points it at its target, where a 307
// or 308 moved it; refused there, nothing is sent.
func (t *Transport) admitCall(c *call) error {
	if !c.existed {
		return nil
	}
	if err := t.admit(c.rec, &c.identity, c.name); err != nil {
		return err
	}
	err := t.reuse(c.rec, c.fresh.Fingerprint(), c.key, c.hasKey)
	if c.expired = errors.Is(err, ErrKeyExpired) && c.reconcile != nil; err != nil && !c.expired {
		return err
	}
	if c.req, err = t.toTarget(c.req, c.rec); err != nil {
		return unsent(c.rec, err)
	}
	return nil
}

// reuse checks that a call may run an operation already in the journal.
func (t *Transport) reuse(rec *Record, fp, key string, hasKey bool) error {
	if rec.Fingerprint() != fp || (hasKey && key != rec.Key) {
		return fmt.Errorf("%w: operation %q (key %s) was %s", ErrKeyReuse, rec.OperationID, rec.Key, rec.Fingerprint())
	}
	r, due := journal.Reusable(rec, t.now(rec), t.cfg.KeyTTL, t.cfg.maxWait())
	switch r {
	case journal.ReuseExpired:
		return fmt.Errorf("%w: operation %q (key %s) created %s", ErrKeyExpired, rec.OperationID, rec.Key, rec.Created.UTC())
	case journal.ReuseSettled:
		return &AlreadySettledError{OperationID: rec.OperationID, Key: rec.Key, Status: rec.Status, Settled: rec.Updated}
	case journal.ReuseNotDue:
		// The server asked for time (Retry-After), or the backoff runs;
		// Resume will send it then.
		pending := &PendingError{Key: rec.Key, OperationID: rec.OperationID, Attempts: rec.Attempts,
			LastStatus: rec.Status, NextAttempt: due}
		if rec.LastError != "" {
			pending.Err = errors.New(rec.LastError) // the journal keeps its text only
		}
		return pending
	}
	// Pending, failed, or settled within KeyTTL: send again with the same key;
	// for a settled one the server replays its stored response.
	return nil
}

// prepareSend builds the operation to run. A failed record is made pending
// again, durably, before it is sent. A call that re-sends a pending
// operation takes a retry-budget token, as a resume does.
func (t *Transport) prepareSend(c *call) (*op, error) {
	ctx, rec := c.req.Context(), c.rec
	// A record from an earlier call may have reached the server already,
	// unless it failed, which it does only before that could happen.
	maybeSent := c.existed && rec.State != StateFailed
	wasPending := rec.State == StatePending
	if rec.State == StateFailed {
		if _, err := journal.Apply(rec, journal.EventRepend, journal.Change{Body: c.buf}); err != nil {
			return nil, err
		}
		if err := t.journal.Update(ctx, rec, journal.Durable); err != nil {
			return nil, fmt.Errorf("idem: write-ahead failed, request not sent: %w", err)
		}
		t.stateChanged(StateFailed, StatePending)
	}
	o := &op{req: c.req, method: rec.Method, rec: rec, key: rec.Key, body: c.buf, maybeSent: maybeSent, uncertain: maybeSent,
		expired: c.expired, limits: c.limits, reconcile: c.reconcile, retryToken: wasPending && rec.Attempts > 0}
	if !o.retryToken {
		return o, nil
	}
	if host := budgetHost(c.req.URL); !t.budget.retry(host, t.clock.Now()) {
		err := t.resendDenied(ctx, rec, host, false)
		t.log(ctx, slog.LevelInfo, "idem: re-send denied by the retry budget, operation left pending", o,
			"attempts", rec.Attempts)
		return nil, err
	}
	return o, nil
}

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
	co, err := t.checkCall(req)
	if err == nil && co.noJournal {
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
	c, err := t.nameCall(req, b.buf, &co)
	if err != nil {
		return nil, err
	}
	journal.Apply(c.fresh, journal.EventCreate, journal.Change{Now: t.clock.Now()}) // a new record: always allowed
	return c.fresh, nil
}

// Crash points, in the order an operation meets them.
const (
	crashWriteAhead     = "write-ahead"     // the write-ahead commit returned; nothing sent yet
	crashRequestWritten = "request-written" // an attempt's request was written; its response not read
	crashResponse       = "response"        // a final response arrived; the settle not written
	crashResume         = "resume"          // Resume re-sent one operation; others may follow
	crashRedirected     = "redirected"      // a 307/308 moved the record, durably; the response not returned
	crashHop            = "hop"             // the hop after a 307/308 arrived; nothing sent for it yet
)

// crash calls the test hook, if any, at a crash point.
func (t *Transport) crash(point string) {
	if t.crashAt != nil {
		t.crashAt(point)
	}
}
