// This file holds reconciliation: before idem re-sends a journaled operation whose
// earlier attempt may have reached the server, and instead of giving up on one whose key
// the server may have forgotten, it asks the Reconciler whether the operation happened.

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

// Reconciler finds out whether an operation happened on the server, for example by
// fetching the resource its business reference names (GET /payments?reference=…). It is
// given a copy of the operation's record (its operation ID, key, method, URL, non-sensitive
// headers and body; expired says the server may have forgotten the key) and must not
// send the operation itself. It answers with a Reconciliation; an error means it cannot
// tell, as the zero Reconciliation does, and is reported with the operation left
// pending. See Options.Reconcile for when it is called.
type Reconciler func(ctx context.Context, rec *Record, expired bool) (Reconciliation, error)

// Reconciliation is what a Reconciler found. The zero Reconciliation means it cannot
// tell yet: nothing is sent, the operation stays pending (the call gets a
// *PendingError matching ErrNotReconciled), and it is asked again at the operation's
// next attempt.
type Reconciliation struct {
	// Response, if not nil, is the operation's outcome as found (the payment fetched by
	// its reference): the operation settles with its status, nothing is sent, and the
	// caller, or Resume's fn, gets it as the call's response. Its body belongs to whoever
	// gets it.
	Response *http.Response
	// Send, if Response is nil, says the operation surely did not happen: it is sent,
	// with its key and journaled bytes.
	Send bool
}

// ErrNotReconciled is matched by the *PendingError of an operation that was not sent
// because its Reconciler could not tell whether it had happened.
var ErrNotReconciled = errors.New("idem: the Reconciler could not tell whether the operation happened")

// verdict is what reconciliation decided for an operation.
type verdict int

const (
	verdictSend      verdict = iota // no Reconciler, or it found the operation did not happen
	verdictHappened                 // settle with the response found
	verdictUndecided                // it cannot tell: stay pending
)

// reconcile asks r, the call's Reconciler (op.reconcile), about rec, and returns its
// verdict, the response it found (verdictHappened) or why it could not tell
// (verdictUndecided).
func (t *Transport) reconcile(ctx context.Context, r Reconciler, rec *Record, expired bool) (verdict, *http.Response, error) {
	if r == nil {
		return verdictSend, nil, nil
	}
	cp := *rec
	cp.Header = rec.Header.Clone()
	cp.Body = append([]byte(nil), rec.Body...)
	got, err := r(ctx, &cp, expired)
	switch {
	case err != nil:
		return verdictUndecided, nil, fmt.Errorf("%w: %w", ErrNotReconciled, err)
	case got.Response != nil:
		if got.Response.Body == nil {
			got.Response.Body = http.NoBody
		}
		return verdictHappened, got.Response, nil
	case got.Send:
		return verdictSend, nil, nil
	}
	return verdictUndecided, nil, ErrNotReconciled
}

// reconcileFirst asks the Reconciler before an attempt of o, which may have reached the
// server before, and reports whether the call ends here: settled with the response found,
// or left pending (until next()) because the Reconciler could not tell. An expired operation
// it cannot tell about stays as it is, with ErrKeyExpired. Otherwise the attempt goes
// ahead, the operation made pending again if it had expired.
func (t *Transport) reconcileFirst(ctx context.Context, o *op, last outcome, next func() time.Time) (bool, *http.Response, error) {
	v, found, why := t.reconcile(ctx, o.reconcile, o.rec, o.expired)
	switch {
	case v == verdictHappened:
		discard(last.resp)
		resp, err := t.reconciled(ctx, o, found)
		return true, resp, err
	case v == verdictUndecided && o.rec.State == StateExpired:
		return true, nil, fmt.Errorf("%w: operation %q (key %s): %w", ErrKeyExpired, o.rec.OperationID, o.rec.Key, why)
	case v == verdictUndecided:
		t.log(ctx, slog.LevelInfo, "idem: the Reconciler could not tell; operation left pending", o, "err", why)
		resp, err := t.giveUp(ctx, o, outcome{err: why, status: last.status}, next())
		return true, resp, err
	}
	o.uncertain = false
	if o.rec.State == StateExpired {
		// Found never to have happened: sent again, pending first, durably.
		before, err := journal.Apply(o.rec, journal.EventRepend, journal.Change{Body: o.body})
		if err == nil {
			err = t.journal.Update(ctx, o.rec, journal.Durable)
		}
		if err != nil {
			return true, nil, fmt.Errorf("idem: write-ahead failed, request not sent: %w", err)
		}
		t.stateChanged(before, StatePending)
	}
	return false, nil, nil
}

// reconciled ends a call whose operation Reconcile found happened: the operation settles
// with resp's status (resolved by hand if it had expired), and resp is the call's response.
func (t *Transport) reconciled(ctx context.Context, o *op, resp *http.Response) (*http.Response, error) {
	ev := journal.EventSettle
	if o.rec.State == StateExpired {
		ev = journal.EventResolve
	}
	// If not recorded, the next call or Resume asks the Reconciler again.
	t.recordSettled(ctx, o, ev, resp.StatusCode, journal.Durable, "idem: reconciled outcome not recorded")
	return resp, nil
}
