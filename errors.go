// This file holds the errors idem returns: sentinels matched with errors.Is,
// PendingError and AlreadySettledError with errors.As. The journal's errors
// (journal.ErrLocked, journal.ErrCorrupt, ...) are package journal's.

package idem

import (
	"errors"
	"fmt"
	"time"

	"github.com/idem-go/idem/journal"
)

var (
	// ErrNoJournal is returned by RoundTrip for a request that must be journaled
	// when the Transport was built without a journal. Nothing is sent.
	ErrNoJournal = errors.New("idem: transport has no journal")

	// ErrBodyTooLarge is returned, before anything is written or sent, when a
	// journaled request body is longer than Options.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("idem: request body too large to journal")

	// ErrInvalidKey is returned when a caller-supplied idempotency key is empty,
	// longer than 255 bytes, or holds a byte outside 0x21-0x7E, when an
	// operation ID does (spaces allowed inside), or when the request carries
	// more than one key header.
	ErrInvalidKey = errors.New("idem: invalid idempotency key")

	// ErrInvalidRequest is returned, before anything is written or sent, for a
	// request idem can never send: nil URL, empty host, a host or port that
	// does not parse, a "#" in the raw query (RFC 9112 section 3.2), a scheme
	// other than http or https, an invalid method or header, or a body shorter
	// than its ContentLength with no GetBody; or for invalid per-call options
	// (WithMaxAttempts below 1, WithAttemptTimeout not positive,
	// WithoutJournal with WithOperationID).
	ErrInvalidRequest = errors.New("idem: invalid request")

	// ErrInvalidOptions is returned by Open and NewTransport when an Options
	// field holds a value with no meaning: a negative duration, size or count,
	// a Multiplier below 1 or not finite, a RandomizationFactor outside [0, 1],
	// either set with a Backoff, a KeyHeader that is not a header name, an
	// empty SensitiveQueryParams name, a RetryBudget out of range, an unusable
	// Encryption Keyring, or, for NewTransport, any Options.Journal. The
	// wrapping error names the field and its value; zero is never an error.
	// Open, and a write-ahead, also return it for a journal once opened with
	// Options.Journal.Encryption and now opened without it.
	ErrInvalidOptions = journal.ErrInvalidOptions

	// ErrKeyReuse is returned when an operation ID or idempotency key already in
	// the journal is used for a request with a different fingerprint (method,
	// URL, body, Content-Type, Content-Encoding). Nothing is sent.
	ErrKeyReuse = errors.New("idem: operation ID or idempotency key reused with a different request")

	// ErrRedirectChanged is returned, inside a *PendingError while the
	// operation is pending, when the hop an http.Client sends after a 307 or
	// 308 is not the journaled request at the Location the server named: its
	// method, URL, body or key was changed (a CheckRedirect rewrote it).
	// Nothing is sent; the operation stays as the journal has it, and Resume
	// sends the journaled request to the Location.
	ErrRedirectChanged = errors.New("idem: redirect hop differs from the journaled operation")

	// ErrIdentityMismatch is returned, before anything is written or sent,
	// when an operation ID or caller's key already in the journal is used
	// under another identity than its operation's: another declared identity,
	// or, with none declared, other credentials. The error tells nothing of
	// the other identity's operation. Resume reports it, nothing sent and the
	// operation left pending, when Options.Identity maps the request
	// PrepareResume prepared to another identity.
	ErrIdentityMismatch = errors.New("idem: operation belongs to another identity")

	// ErrAlreadySettled is matched (errors.Is) by an *AlreadySettledError: the
	// operation settled, and either that was longer than KeyTTL ago (so it is
	// not sent again), or a call re-sent it within KeyTTL and got no answer,
	// or a redirect of that re-send points elsewhere than where it settled
	// (not followed). Either way its stored outcome stands.
	ErrAlreadySettled = errors.New("idem: operation already settled")

	// ErrKeyExpired is reported for an operation that stayed pending for longer
	// than KeyTTL: the server may have forgotten the key, so it is not re-sent.
	// Reconcile it (for example, GET the resource by its business reference).
	// Resume reports it with the Outcome's Record, which carries what that
	// needs: operation ID, key, method, URL, headers, body, Created (the first
	// attempt's time) and LastAttempt; the journal keeps the expired record,
	// body included, for Options.Journal.Retention (see boltjournal.Journal.Lookup).
	ErrKeyExpired = errors.New("idem: idempotency key expired while pending")

	// ErrOutcomeUnknown is returned for an unjournaled, unkeyed non-idempotent
	// request whose connection failed after the request was written: the server
	// may or may not have acted, and idem did not retry.
	ErrOutcomeUnknown = errors.New("idem: outcome unknown, request may have reached the server")

	// ErrRetryBudgetExhausted is matched when a retry was not made because
	// its host's RetryBudget was empty: by the *PendingError of a journaled
	// operation (which stays pending, for Resume), or joined with the last
	// error of an unjournaled request.
	ErrRetryBudgetExhausted = errors.New("idem: retry budget exhausted")

	// ErrSensitiveHeaderMissing is reported by Resume, nothing sent, for an
	// operation whose original request carried a sensitive header (say
	// Authorization) that Options.PrepareResume did not put back. The
	// operation stays pending.
	ErrSensitiveHeaderMissing = errors.New("idem: sensitive header not restored for resume")

	// ErrSensitiveQueryMissing is reported by Resume, nothing sent, for an
	// operation whose URL carried a parameter named in
	// Options.SensitiveQueryParams that Options.PrepareResume did not put
	// back; the operation stays pending. A call naming an operation moved by
	// a 307 or 308 returns it (inside a *PendingError while pending) when the
	// Location names such a parameter the call's URL cannot give (it lacks
	// it, or the Location is on another domain).
	ErrSensitiveQueryMissing = errors.New("idem: sensitive query parameter not restored for resume")

	// ErrPermanent wraps failures that no retry can fix (certificate errors,
	// invalid requests); the operation is marked failed.
	ErrPermanent = errors.New("idem: permanent failure")
)

// PendingError is returned by RoundTrip when a journaled operation's outcome
// is still unknown: its attempts or time ran out, the caller's context ended,
// the RetryBudget denied a retry or re-send, or a call repeated it before its
// next-attempt time. The operation stays pending, for Resume. It unwraps to
// the last cause: a context error, a network error, an error matching
// ErrRetryBudgetExhausted, or nil after a retryable status; for a call that
// sent nothing because the operation was not due, to the journal's text of
// the last cause, which matches none of those.
type PendingError struct {
	Key         string    // the idempotency key sent on every attempt
	OperationID string    // the caller's operation ID, or ""
	Attempts    int       // attempts recorded so far, across process lifetimes (see Record.Attempts)
	LastStatus  int       // status of the last response, or 0 if none
	Err         error     // last error or the context's error; may be nil
	NextAttempt time.Time // earliest time a new attempt may be made: the backoff, the server's Retry-After, or the retry budget's probe
}

func (e *PendingError) Error() string {
	cause := "no response"
	switch {
	case e.Err != nil:
		cause = e.Err.Error()
	case e.LastStatus != 0:
		cause = fmt.Sprintf("last status %d", e.LastStatus)
	}
	op := "operation"
	if e.OperationID != "" {
		op = fmt.Sprintf("operation %q", e.OperationID)
	}
	next := ""
	if !e.NextAttempt.IsZero() {
		// Milliseconds: a backoff is often under a second, and a time cut to
		// the second reads as already past.
		next = "; next attempt not before " + e.NextAttempt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return fmt.Sprintf("idem: %s (key %s) pending after %d attempt(s): %s%s", op, e.Key, e.Attempts, cause, next)
}

func (e *PendingError) Unwrap() error { return e.Err }

// AlreadySettledError is returned when an operation ID names an operation that
// settled longer than KeyTTL ago, or when a call re-sent a settled operation
// and got no answer, or a 307 or 308 to somewhere it did not settle.
// Nothing more will be sent for it. It matches ErrAlreadySettled.
type AlreadySettledError struct {
	OperationID string
	Key         string
	Status      int       // the stored final status
	Settled     time.Time // when it settled
}

func (e *AlreadySettledError) Error() string {
	return fmt.Sprintf("idem: operation %q already settled with status %d at %s",
		e.OperationID, e.Status, e.Settled.UTC().Format(time.RFC3339))
}

func (e *AlreadySettledError) Unwrap() error { return ErrAlreadySettled }
