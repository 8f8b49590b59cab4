// This file holds Resume: after a restart (or whenever the caller likes) it
// re-sends every pending operation in the journal with its key and exact
// bytes, through the same attempt loop as RoundTrip.

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/idem-go/idem/journal"
)

// Outcome is the result of resuming one operation. Exactly one of Response and
// Err is non-nil. Err may be a *PendingError (still unknown, resumed later;
// matching ErrRetryBudgetExhausted if the RetryBudget held it back, unsent),
// an error matching ErrKeyExpired (not sent: reconcile it), an error from
// Options.PrepareResume, ErrSensitiveHeaderMissing, ErrSensitiveQueryMissing,
// ErrIdentityMismatch, or journal.ErrUnknownEncryptionKey or
// journal.ErrDecrypt (a sealed record that could not be opened: nothing sent,
// pending until KeyTTL, then expired with ErrKeyExpired joined to the
// reason; Record may be Sealed, without its request).
type Outcome struct {
	// Record is the operation as journaled after this outcome: with its
	// body while pending, failed or expired; without once settled, or when
	// the RetryBudget held it back. It is nil only when a background
	// resumer reports, in Err, that it could not read the journal.
	Record   *Record
	Response *http.Response
	Err      error
}

// errNotPending marks an operation settled by a call since Resume listed it,
// and errNotDue one a call gave up on until a later NextAttempt.
var (
	errNotPending = errors.New("idem: operation no longer pending")
	errNotDue     = errors.New("idem: operation not due yet")
)

// Resume re-sends every pending operation whose next-attempt time has come and
// reports each outcome to fn, one call at a time. fn must close
// Outcome.Response.Body; if fn is nil, idem closes it. With a Reconciler
// (Options.Reconcile, or WithReconcile on ctx), each is first looked up:
// found, it settles with what was found, reported as its Response, unsent.
// Without one, operations pending for longer than Options.KeyTTL are not
// sent: they become expired and are reported with ErrKeyExpired. Operations
// in flight in this process are skipped, and so are the operations already
// attempted of a host whose RetryBudget held one back in this pass (that one
// is reported). At most Options.ResumeConcurrency operations are sent at
// once, each with up to Options.MaxAttempts attempts; WithMaxAttempts and
// WithAttemptTimeout on ctx override those for every operation sent. The
// slots are shared fairly among hosts: while another host has due
// operations, one holding more than its share gives a slot up after its
// current attempt or backoff wait (the operation stays pending, with a
// *PendingError), so a host that never answers delays the others by at most
// one Options.AttemptTimeout or, if longer, one Options.MaxInterval.
//
// Resume returns when every due operation has been tried, or ctx ends; the
// error is non-nil only if the journal could not be read, ctx carries an
// invalid per-call option (ErrInvalidRequest), or there is no journal
// (ErrNoJournal). To resume in the background, see Client.StartResumer.
func (t *Transport) Resume(ctx context.Context, fn func(Outcome)) error {
	if t.journal == nil {
		return ErrNoJournal
	}
	lim, err := t.cfg.callLimits(ctx)
	if err != nil {
		return err
	}
	return t.newResumeRun(ctx, lim, nil, fn, func(time.Time) {}).all()
}

// resumeDenied reports an operation that Resume did not send because its
// host's retry budget was empty. Nothing is sent or written; the operation
// stays pending for a later pass.
func (t *Transport) resumeDenied(ctx context.Context, rec *Record, host string) error {
	err := t.resendDenied(ctx, rec, host, true)
	t.logResume(ctx, rec, nil, nil, err)
	return err
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// resume runs one pending operation, or expires it, and logs the outcome.
// isRetry says Resume took a retry token to send it.
func (t *Transport) resume(ctx context.Context, rec *Record, lim limits, isRetry bool) (resp *http.Response, err error) {
	var req *http.Request
	defer func() { t.logResume(ctx, rec, req, resp, err) }()
	// Re-read under the lock, body included: a call may have settled it, or
	// given up on it until later, since the listing.
	cur, err := t.journal.Reload(ctx, rec)
	if err != nil {
		// A sealed record that cannot be opened ends past KeyTTL too.
		return nil, t.expireUnopened(ctx, rec, err)
	}
	if cur == nil || cur.State != StatePending {
		return nil, errNotPending
	}
	*rec = *cur
	if due, now := t.dueAt(rec); now.Before(due) {
		return nil, errNotDue
	}
	expired := t.keyExpired(rec)
	if expired && t.reconciler(ctx) == nil {
		if _, err := journal.Apply(rec, journal.EventExpire, journal.Change{Now: t.clock.Now()}); err != nil {
			return nil, err
		}
		if err := t.journal.Update(ctx, rec, journal.Deferred); err != nil {
			return nil, err
		}
		t.stateChanged(StatePending, StateExpired)
		t.cfg.observer.Result(ctx, ResultEvent{State: StateExpired, Status: rec.Status, Attempts: rec.Attempts, Resumed: true})
		return nil, fmt.Errorf("%w: operation %q (key %s) created %s, last attempt %s",
			ErrKeyExpired, rec.OperationID, rec.Key, rec.Created.UTC(), rec.LastAttempt.UTC())
	}
	// A 307 or 308 moves the operation: it is rebuilt and sent there, as an
	// http.Client would follow it, until the 10th settles it.
	for hops := 0; ; hops++ {
		if req, err = t.rebuild(ctx, rec); err != nil {
			return nil, err
		}
		if host := rec.TargetHost(); host != "" {
			req.Host = host // an override; else NewRequest's, the target's own
		}
		if err := t.prepareResume(req, rec); err != nil {
			t.cfg.observer.Result(ctx, ResultEvent{State: StatePending, Status: rec.Status, Attempts: rec.Attempts,
				Resumed: true, NotSent: true})
			return nil, err
		}
		// It may have reached the server before: a Reconciler is asked first.
		resp, err = t.run(ctx, &op{req: req, method: rec.Method, rec: rec, key: rec.Key, body: rec.Body, reconcile: t.reconciler(ctx),
			maybeSent: true, uncertain: hops == 0, expired: expired, limits: lim, resumed: true,
			retryToken: isRetry && hops == 0, redirects: hops})
		if err != nil || !t.resumedMove(resp, rec) {
			return resp, err
		}
		discard(resp)
	}
}

// rebuild builds the request Resume sends for rec. Each attempt sends a
// copy of it with its own header map and a reader over rec.Body
// (op.newRequest), so without a hook that may read or change it
// (PrepareResume, Options.Identity) it shares rec's header and carries no
// body of its own: two copies and three allocations fewer per operation.
func (t *Transport) rebuild(ctx context.Context, rec *Record) (*http.Request, error) {
	hooked := t.cfg.PrepareResume != nil || t.cfg.Identity != nil
	var body io.Reader
	if hooked {
		body = bytes.NewReader(rec.Body)
	}
	req, err := http.NewRequestWithContext(resumeContext(ctx, rec), rec.Method, rec.Target(), body)
	if err != nil {
		return nil, fmt.Errorf("%w: journaled URL: %w", ErrInvalidRequest, err)
	}
	switch {
	case hooked:
		req.Header = rec.Header.Clone()
	case rec.Header != nil:
		req.Header = rec.Header
	}
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	return req, nil
}

// prepareResume lets PrepareResume restore what the journal does not keep,
// and refuses to send without a sensitive header or query parameter the
// original carried.
func (t *Transport) prepareResume(req *http.Request, rec *Record) error {
	if t.cfg.PrepareResume != nil {
		if err := t.cfg.PrepareResume(req); err != nil {
			return fmt.Errorf("idem: PrepareResume: %w", err)
		}
	}
	if err := t.checkResumed(req, rec); err != nil {
		return err
	}
	for _, name := range rec.Dropped {
		if len(headerValues(req.Header, name)) == 0 {
			return fmt.Errorf("%w: %s (operation %q)", ErrSensitiveHeaderMissing, name, rec.OperationID)
		}
	}
	if len(rec.DroppedQuery) > 0 {
		q := req.URL.Query()
		for _, name := range rec.DroppedQuery {
			if !q.Has(name) {
				return fmt.Errorf("%w: %s (operation %q)", ErrSensitiveQueryMissing, name, rec.OperationID)
			}
		}
	}
	return nil
}

// expireUnopened expires a pending operation Resume could not open (openErr:
// unknown key ID, or no decrypt) once older than KeyTTL, sealed part and body
// kept, with an error matching ErrKeyExpired and openErr. Within KeyTTL it
// returns openErr, for the key to be put back. rec is as listed.
func (t *Transport) expireUnopened(ctx context.Context, rec *Record, openErr error) error {
	if !errors.Is(openErr, journal.ErrUnknownEncryptionKey) && !errors.Is(openErr, journal.ErrDecrypt) {
		return openErr
	}
	if !t.keyExpired(rec) {
		return openErr
	}
	cur := *rec
	if _, err := journal.Apply(&cur, journal.EventExpire, journal.Change{Now: t.clock.Now()}); err != nil {
		return errNotPending
	}
	if err := t.journal.Update(ctx, &cur, journal.Durable); err != nil {
		if errors.Is(err, journal.ErrGone) {
			return errNotPending // settled, or given up, since the listing
		}
		return err
	}
	*rec = cur
	t.stateChanged(StatePending, StateExpired)
	t.cfg.observer.Result(ctx, ResultEvent{State: StateExpired, Status: rec.Status, Attempts: rec.Attempts, Resumed: true})
	return fmt.Errorf("%w: operation %q (key %s) created %s, last attempt %s; it could not be opened: %w",
		ErrKeyExpired, rec.OperationID, rec.Key, rec.Created.UTC(), rec.LastAttempt.UTC(), openErr)
}

// recordHost is the host (host:port) of a journaled operation's target,
// "" if it has none.
func recordHost(rec *Record) string {
	target := rec.Target()
	if origin, ok := originOf(target); ok {
		target = origin
	}
	return targetHost(target)
}

// targetHost is budgetHost of target, an absolute URL or its origin.
func targetHost(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return ""
	}
	return budgetHost(u)
}

// originOf cuts target, an absolute URL, after its authority
// (scheme://host:port); ok is false if it has none. A journaled URL holds
// no userinfo, so the authority ends at the first '/', '?' or '#'.
func originOf[T string | []byte](target T) (origin T, ok bool) {
	i := 0
	for i < len(target) && isSchemeByte(target[i], i) {
		i++
	}
	if i == 0 || i+3 > len(target) || target[i] != ':' || target[i+1] != '/' || target[i+2] != '/' {
		return origin, false
	}
	for j := i + 3; j < len(target); j++ {
		switch target[j] {
		case '/', '?', '#':
			return target[:j], true
		}
	}
	return target, true
}

// isSchemeByte reports whether c may be byte i of a URL scheme (RFC 3986,
// section 3.1).
func isSchemeByte(c byte, i int) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		return true
	case '0' <= c && c <= '9', c == '+', c == '-', c == '.':
		return i > 0
	}
	return false
}

// maxOrigins bounds a scan's cache of hosts: past it, the cache starts
// again.
const maxOrigins = 1024

// originHosts caches the host of each origin a scan has met. Not safe for
// concurrent use.
type originHosts map[string]string

// of returns the host of target's origin; ok is false if it has none.
func (h originHosts) of(target []byte) (host string, ok bool) { return hostOf(h, target) }

// record returns recordHost(rec), parsing each origin once.
func (h originHosts) record(rec *Record) string {
	if host, ok := hostOf(h, rec.Target()); ok {
		return host
	}
	return recordHost(rec)
}

// hostOf is originHosts.of for a target of either type: a string's
// lookup needs no conversion.
func hostOf[T string | []byte](h originHosts, target T) (host string, ok bool) {
	origin, ok := originOf(target)
	if !ok {
		return "", false
	}
	if host, ok := h[string(origin)]; ok {
		return host, true
	}
	if len(h) == maxOrigins {
		clear(h)
	}
	host = targetHost(string(origin))
	h[string(origin)] = host
	return host, true
}

// picker returns the journal.Picker of a scan that leaves out left and reads
// again only what only left out (nil: everything), judging a record by its
// target's host before the journal builds it: it skips hosts left out and
// takes as many of a host as its queue had room for when first met. The
// scan still judges each record: a Store may give one pick did not see.
func (r *resumeRun) picker(left, only *leftOut) func(uint64, []byte) journal.Pick {
	hosts := originHosts{}
	room := map[string]int{}
	return func(seq uint64, target []byte) journal.Pick {
		if only != nil && only.rest == 0 && left.holdsAll(only) {
			return journal.Stop
		}
		host, ok := hosts.of(target)
		if !ok {
			return journal.Take
		}
		if _, held := left.hosts[host]; held || only != nil && !only.takes(host, seq) {
			return journal.Skip
		}
		n, ok := room[host]
		if !ok {
			n = r.pool.roomFor(host)
		}
		if n == 0 {
			left.hold(host, seq)
			r.pool.hold(host)
			return journal.Skip
		}
		room[host] = n - 1
		return journal.Take
	}
}

// resumeContext is ctx for the request Resume rebuilds for rec: it declares
// rec's identity, or none (whatever ctx declared), for PrepareResume to read.
func resumeContext(ctx context.Context, rec *Record) context.Context {
	if id, _ := IdentityFrom(ctx); id == rec.Identity {
		return ctx
	}
	return WithIdentity(ctx, rec.Identity)
}

// checkResumed refuses the request PrepareResume prepared for rec when
// Options.Identity maps it to another identity than rec's. Where it cannot
// tell, Resume trusts PrepareResume: a credential tag is not checked, or a
// token refreshed after a restart would never be resumed.
func (t *Transport) checkResumed(req *http.Request, rec *Record) error {
	if t.cfg.Identity == nil || rec.Identity == "" {
		return nil
	}
	id, err := t.cfg.Identity(req)
	if err != nil {
		return fmt.Errorf("idem: Options.Identity: %w", err)
	}
	if id != "" && id != rec.Identity {
		return fmt.Errorf("%w: operation %q (key %s): Options.Identity maps the request PrepareResume prepared to another identity; nothing was sent",
			ErrIdentityMismatch, rec.OperationID, rec.Key)
	}
	return nil
}
