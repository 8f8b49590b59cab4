// store.go is the contract between the middleware (middleware.go) and the shared storage
// that makes its claims atomic across instances: the Store interface, the Scope that names
// a record, and what a record holds. memstore is the in-memory Store; servertest is the
// conformance suite every Store runs.

package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"net/http"
	"time"
)

// Store keeps idempotency records, shared by every instance of a service. It is small on
// purpose: an in-memory map, a Redis (SET NX PX claims, a Lua script for each fenced
// transition) or a PostgreSQL table (INSERT ... ON CONFLICT DO NOTHING, then UPDATE ...
// WHERE token = $n) implements it in an afternoon. servertest.Run checks an implementation.
//
// A record is either in progress (a holder runs the handler under a lease) or done (it
// holds the response to replay). Every transition of an in-progress record is fenced by the
// holder's token: the Store changes the record only if the token given is still the one it
// holds, and otherwise returns ErrLeaseLost, so a holder whose lease was taken over can
// never overwrite a newer holder's work.
//
// Time is the Store's own: leases and expiry are judged by the Store's clock (Redis's, the
// database's), never the caller's, so instances whose clocks disagree agree on every lease.
// Durations come in and go out relative to that clock. An expired record is gone: every
// method behaves as if it had never existed, and the Store may delete it at any time.
//
// How the shared stores map it (notes for their authors):
//   - Redis: one hash per record at a key such as "idem:{"+sc.ID()+"}", so that every key a
//     record may ever need shares one hash tag and a script touching them runs on one
//     cluster slot. Claim is SET NX PX (or HSETNX in a script) with the key's PX as the TTL;
//     the lease is a field holding an expiry in Redis's TIME; Renew, Complete, Release and
//     TakeOver are Lua scripts that compare the token field first. A done record keeps the
//     token that completed it, so that a repeated Complete is recognised.
//   - PostgreSQL: a table keyed by the Scope (or sc.ID()), Claim an INSERT ... ON CONFLICT
//     DO NOTHING followed by a SELECT of the row that won, each transition an UPDATE ...
//     WHERE scope = $1 AND token = $2 (and lease_until <= now for TakeOver), times from
//     clock_timestamp(). Completing inside the service's own transaction is a method of that store
//     taking the transaction and a Hold (see HoldFrom and MarkCompleted).
//
// The same Store serves process-once message consumers: the Scope is then, e.g., the
// consumer group as Identity, "MESSAGE" as Method, the queue as Path and the message ID as
// Key.
//
// Every call may have happened even when it returns an error other than ErrLeaseLost (a
// timeout, a cut connection after the command was sent): so each one is safe to repeat
// with the same arguments, and a repeat recognises the caller's own earlier success by its
// token. The middleware and the consumer repeat a call whose outcome they did not learn;
// a claim whose handler never ran is released once the Store answers again.
// Implementations must be safe for concurrent use by many goroutines and processes.
type Store interface {
	// Claim atomically creates an in-progress record for sc held under token, holding
	// fingerprint, with a lease of lease and an expiry of ttl (both > 0, from the Store's
	// now), unless a live record for sc exists. token is minted by the caller (NewToken)
	// and never used before for sc. If Claim created the record, or finds it in progress
	// under token already (a repeat of a Claim whose reply was lost: the lease is left as
	// it is), it returns a Claim with Claimed set and Token = token. Otherwise it returns
	// the live record, unchanged, in Claim.Record (its Response a copy the caller may
	// keep); Claim never takes over or overwrites a live record, even one with another
	// fingerprint or a lapsed lease. A token that a Release found nothing to release for
	// is refused for a while (at least ReleasedTokenTTL) with ErrLeaseLost: a claim
	// delayed in the network past its own clean-up must not create a record no handler
	// will run.
	Claim(ctx context.Context, sc Scope, token, fingerprint string, lease, ttl time.Duration) (Claim, error)

	// Renew extends the lease of the in-progress record for sc held by token to lease from
	// the Store's now (a heartbeat), and keeps the record from expiring before the lease
	// ends. It succeeds even if the lease had lapsed, as long as no one took it over. A
	// lease of 0 ends the lease now: the holder hands the record over to recovery
	// (TakeOver) without completing it. It returns ErrLeaseLost if the record is gone,
	// done, or held under another token.
	Renew(ctx context.Context, sc Scope, token string, lease time.Duration) error

	// Complete turns the in-progress record for sc held by token into a done record holding
	// resp (not nil; a Store that keeps it in memory keeps a copy) that expires ttl from
	// the Store's now. Its fingerprint is kept, and so is token, as the one that completed
	// it: a repeated Complete with token on the record it completed returns nil and
	// changes nothing. Otherwise it returns ErrLeaseLost, changing nothing, if the record
	// is gone, done, or held under another token.
	Complete(ctx context.Context, sc Scope, token string, resp *Response, ttl time.Duration) error

	// Release deletes the in-progress record for sc held by token, so that the next Claim
	// for sc creates a new record: the handler stored nothing and a retry may run it again.
	// If sc has no live record (released already, expired, or a Claim that never landed
	// yet) it returns nil, the record being gone as Release wants, and remembers token
	// for at least ReleasedTokenTTL, so that a late Claim with it is refused. It returns
	// ErrLeaseLost, changing nothing, if the record is done or held under another token.
	Release(ctx context.Context, sc Scope, token string) error

	// TakeOver gives the in-progress record for sc a new holder, token (minted by the
	// caller, never used before for sc), when its lease has lapsed: if the record is still
	// held under stale (the token a Claim reported) and its lease ended by the Store's
	// clock, it stores token with a lease of lease; stale is fenced out from then on. A
	// repeat that finds the record held under token already returns nil. Otherwise (the
	// holder renewed, someone else took over, the record is done or gone) it returns
	// ErrLeaseLost and changes nothing. Exactly one of several concurrent TakeOvers of one
	// stale token succeeds.
	TakeOver(ctx context.Context, sc Scope, stale, token string, lease time.Duration) error
}

// ReleasedTokenTTL is how long a Store remembers a token that Release found nothing for:
// longer than a request can stay in the network (TCP gives up on a silent connection
// after about 15 minutes).
const ReleasedTokenTTL = 30 * time.Minute

// NewToken returns a new fencing token for Store.Claim and Store.TakeOver: 128 random
// bits from crypto/rand, as 26 base32 characters. Callers mint tokens so that a call whose
// reply was lost can be repeated and recognised as their own.
func NewToken() string { return rand.Text() }

// Scope names one idempotency record: a key means one operation only for one identity, one
// method and one path (draft-ietf-httpapi-idempotency-key-header section 5 recommends such a
// composite key). A Store treats two Scopes that differ in any field as two records. A
// Scope is a plain value: copies are independent and safe to use from any goroutine.
type Scope struct {
	// Identity is who sent the request, as Options.Identity reported it, hashed: a Store
	// never sees the credential or account name itself.
	Identity string
	Method   string
	Path     string // escaped, percent-encodings normalised (RFC 3986 section 6.2.2)
	Key      string // the idempotency key, as the client sent it, unquoted
}

// ID returns a fixed-length name for sc: hex SHA-256 over its length-prefixed fields, so no
// two Scopes share one. A Store may key its records by it (a Redis key, a primary key)
// instead of the four fields; it holds no character that needs escaping. It allocates once
// (the string): the fields are gathered on the stack unless they total more than about 450
// bytes, since a Store names a record with it on every call.
func (sc Scope) ID() string {
	var stack [512]byte
	b := stack[:0]
	for _, f := range [...]string{sc.Identity, sc.Method, sc.Path, sc.Key} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// Hash returns a 64-bit hash of sc under seed, over its length-prefixed fields: two Scopes
// that differ in any field hash apart but by chance (maphash), so an in-process index keyed
// by it must still compare the Scope. It allocates nothing.
func (sc Scope) Hash(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var n [8]byte
	for _, f := range [...]string{sc.Identity, sc.Method, sc.Path, sc.Key} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(f)))
		_, _ = h.Write(n[:])
		_, _ = h.WriteString(f)
	}
	return h.Sum64()
}

// Claim is what Store.Claim did: created a record (Claimed, Token), or found one (Record).
// Like Record, it is a value owned by whoever received it, not to be shared while modified.
type Claim struct {
	Claimed bool
	Token   string // the new holder's fencing token, when Claimed
	Record  Record // the live record found, when not Claimed
}

// State is where a record is in its life. It is a plain value, safe to share.
type State int

const (
	// StateInProgress: a holder is running (or ran, and died running) the handler.
	StateInProgress State = iota + 1
	// StateDone: the record holds the response to replay.
	StateDone
)

// String names s for logs.
func (s State) String() string {
	switch s {
	case StateInProgress:
		return "in progress"
	case StateDone:
		return "done"
	}
	return "State(" + itoa(int(s)) + ")"
}

// Record is a live record, as a Store reports it: a snapshot owned by the caller, not
// safe for concurrent modification.
type Record struct {
	State       State
	Fingerprint string // as given to the Claim that created the record

	// Token is the current holder's token (in progress only): the stale token to hand
	// TakeOver once the lease has lapsed.
	Token string
	// LeaseLeft is how long the holder's lease still runs by the Store's clock (in progress
	// only); zero or less means it has lapsed: the holder died or stalled.
	LeaseLeft time.Duration
	// ExpiresIn is how long until the Store forgets the record, by its clock.
	ExpiresIn time.Duration
	// Response is the stored response (done only).
	Response *Response
}

// Response is a stored answer, replayed byte for byte. It is not safe for concurrent
// modification; the middleware never modifies one it handed to or got from a Store, so
// reading one from many goroutines is safe.
type Response struct {
	// Status is the HTTP status code; for a response that cannot be replayed, the status
	// the handler sent (0 if it hijacked the connection before sending one).
	Status int
	// Header holds the stored header fields, without hop-by-hop fields, Set-Cookie (by
	// default) and the middleware's own.
	Header http.Header
	// Body is the whole response body.
	Body []byte
	// Unreplayable, if not empty, says why the handler's answer was not kept (one of the
	// Unreplayable... constants): the request ran, but later copies get a problem response
	// instead of a replay, never a truncated one. Header and Body are then empty.
	Unreplayable string
}

// Reasons a Response is not replayable (Response.Unreplayable).
const (
	UnreplayableTooLarge = "too-large" // the body exceeded Options.MaxResponseBytes
	UnreplayableStreamed = "streamed"  // the handler flushed: the answer was streamed
	UnreplayableHijacked = "hijacked"  // the handler took over the connection
	UnreplayablePanicked = "panicked"  // the handler panicked: its outcome is unknown
)
