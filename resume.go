// This file holds Resume: after a restart (or whenever the caller likes) it
// re-sends every pending operation in the journal with its key and exact
// bytes, through the same attempt loop as RoundTrip (attempt.go).

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// Outcome is the result of resuming one operation. Exactly one of Response and
// Err is non-nil. Err may be a *PendingError (still unknown; resumed again
// later), an error matching ErrKeyExpired (not sent: reconcile it), or an
// error from Options.PrepareResume.
type Outcome struct {
	Record   *Record // the operation as journaled (body included)
	Response *http.Response
	Err      error
}

// errNotPending marks an operation settled by a call since Resume listed it.
var errNotPending = errors.New("idem: operation no longer pending")

// Resume re-sends every pending operation whose next-attempt time has come and
// reports each outcome to fn, one call at a time. fn must close
// Outcome.Response.Body; if fn is nil, idem closes it. Operations pending for
// longer than Options.KeyTTL are not sent: they become expired and are
// reported with ErrKeyExpired. Operations in flight in this process are
// skipped. At most Options.ResumeConcurrency operations are sent at once.
//
// Resume returns when every due operation has been tried, or ctx ends; the
// error is non-nil only if the journal could not be read.
func (t *Transport) Resume(ctx context.Context, fn func(Outcome)) error {
	if t.journal == nil {
		return ErrNoJournal
	}
	recs, err := t.journal.pending()
	if err != nil {
		return err
	}
	var (
		mu  sync.Mutex // serialises fn
		wg  sync.WaitGroup
		sem = make(chan struct{}, t.cfg.ResumeConcurrency)
	)
	report := func(out Outcome) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case fn != nil:
			fn(out)
		case out.Response != nil:
			out.Response.Body.Close()
		}
	}
	for _, rec := range recs {
		if ctx.Err() != nil {
			break
		}
		if t.clock.Now().Before(rec.NextAttempt) {
			continue
		}
		name := lockName(rec)
		if !t.locks.tryLock(name) {
			continue // in flight in this process
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { t.locks.unlock(name); <-sem; wg.Done() }()
			resp, err := t.resume(ctx, rec)
			if errors.Is(err, errNotPending) {
				return
			}
			report(Outcome{Record: rec, Response: resp, Err: err})
		}()
	}
	wg.Wait()
	return nil
}

func lockName(rec *Record) string {
	if rec.OperationID != "" {
		return "o\x00" + rec.OperationID
	}
	return "k\x00" + rec.Key
}

// resume runs one pending operation, or expires it.
func (t *Transport) resume(ctx context.Context, rec *Record) (*http.Response, error) {
	// Re-read under the lock, body included: a call may have settled it since
	// the listing.
	cur, err := t.journal.get(rec.ID)
	if err != nil {
		return nil, err
	}
	if cur == nil || cur.State != Pending {
		return nil, errNotPending
	}
	*rec = *cur
	if t.clock.Now().Sub(rec.Created) > t.cfg.KeyTTL {
		rec.State, rec.Updated = Expired, t.clock.Now()
		if err := t.journal.save(rec); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: operation %q (key %s) created %s, last attempt %s",
			ErrKeyExpired, rec.OperationID, rec.Key, rec.Created.UTC(), rec.LastAttempt.UTC())
	}
	req, err := http.NewRequestWithContext(ctx, rec.Method, rec.URL, bytes.NewReader(rec.Body))
	if err != nil {
		return nil, fmt.Errorf("%w: journaled URL: %w", ErrInvalidRequest, err)
	}
	req.Header = rec.Header.Clone()
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	req.Host = rec.Host
	if t.cfg.PrepareResume != nil {
		if err := t.cfg.PrepareResume(req); err != nil {
			return nil, fmt.Errorf("idem: PrepareResume: %w", err)
		}
	}
	for _, name := range rec.Dropped {
		if len(headerValues(req.Header, name)) == 0 {
			return nil, fmt.Errorf("%w: %s (operation %q)", ErrSensitiveHeaderMissing, name, rec.OperationID)
		}
	}
	return t.run(ctx, &op{req: req, rec: rec, key: rec.Key, body: rec.Body, hasBody: len(rec.Body) > 0, maybeSent: true})
}
