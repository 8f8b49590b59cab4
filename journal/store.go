// Package journal is idem's storage contract: the Store interface that
// holds operations, the Record it stores, an operation's states and the one
// state machine that moves it between them (state.go), and the errors a
// Store returns.
//
// idem.Open gives the embedded default, a bbolt file. The package
// journaltest holds the conformance suite every Store must pass.
package journal

import (
	"context"
	"iter"
	"time"
)

// Store keeps a journal's operations. Implementations must be safe for
// concurrent use. Records passed in and returned are copies: a Store never
// keeps a caller's *Record or its slices and maps, nor lets a caller change
// a stored one. A settled record may come back without its Header and Body:
// they are needed only to send it. The package journaltest checks all of
// this; every Store must pass it.
//
// Durability is the point: a Store must not return from Create, or from
// Update with Durable, before the write would survive a crash of the
// process and of the machine (bbolt: after fsync; PostgreSQL: after
// COMMIT). Nothing is sent before Create returned.
type Store interface {
	// Create writes rec, a new operation in StatePending, durably, and sets
	// its Ref. It fails with an error matching ErrNameTaken, writing
	// nothing, if rec's operation ID, or its key when rec.CallerKey is set,
	// names an operation already stored. rec.BodySHA256 must be the hash of
	// rec.Body.
	Create(ctx context.Context, rec *Record) error

	// Get returns the operation name names, with its body, or nil and no
	// error if there is none (never was, or pruned). A key idem minted
	// (CallerKey false) is not a name a Store must find. For an operation
	// not yet settled whose body does not match its BodySHA256 it returns
	// an error matching ErrCorrupt: it would be sent.
	Get(ctx context.Context, name Name) (*Record, error)

	// Reload returns the newest state of rec, a record this Store returned,
	// with its body, or nil if it is gone (pruned). It checks the body as
	// Get does.
	Reload(ctx context.Context, rec *Record) (*Record, error)

	// Update writes rec's new state (after Apply); rec keeps its Ref, and
	// its place in Pending's order, through every update, a repend
	// included. With Deferred it may
	// return before the write is durable; it is durable after a bounded
	// delay (tens of milliseconds), after Flush, or after Close: losing it
	// in a crash only costs one harmless resend with the same key. With
	// Durable it returns once the write is durable, as Create does; a
	// failed operation made pending again (EventRepend) is always written
	// Durable, and fails with ErrGone if it was pruned meanwhile. A record
	// listed Sealed (its sealed part closed: the Store lacks its key) may
	// be updated too, as Resume expires one past KeyTTL: the Store keeps
	// its sealed part and body as stored, and writes it only while it is
	// pending (ErrGone otherwise).
	Update(ctx context.Context, rec *Record, d Durability) error

	// Flush makes every Update made before it durable.
	Flush(ctx context.Context) error

	// Pending yields the pending operations without their bodies, in
	// creation order, from the first whose Ref's Seq is above after: a
	// stream whose memory stays bounded however many are pending. The
	// sequence ends at the first error, which it yields. It reads the newest
	// state, deferred updates included. A record whose body is damaged is
	// still listed (Reload reports the damage), so that one bad record does
	// not hold back the others.
	Pending(ctx context.Context, after uint64) iter.Seq2[*Record, error]

	// PendingCount returns how many operations are pending.
	PendingCount(ctx context.Context) (int, error)

	// Claim holds the operation name names for sending, waiting while
	// another holder in this process has it, until ctx ends. TryClaim does
	// not wait. The holder must Release it. Claims are this process's
	// alone, and keep working after Close (there is nothing left to send).
	Claim(ctx context.Context, name Name) error
	TryClaim(name Name) bool
	Release(name Name)

	// IdentityKey returns the Store's HMAC key for credential tags
	// (Record.CredentialTag): 32 random bytes, made once per journal and
	// kept with it, so that tags made before a restart compare equal after
	// it. A Store opened read-only may return nil.
	IdentityKey() []byte

	// LatestWritten returns the newest time the Store holds in a record or
	// has been given to write (Record.Written); zero if none. A
	// Transport's clock never reads earlier.
	LatestWritten() time.Time

	// Close flushes deferred updates and releases the Store. Later calls
	// (claims aside) return errors matching ErrClosed; a second Close does
	// nothing and returns the first one's error, or one matching ErrClosed.
	Close() error
}

// Clock is implemented by a Store that several machines share and whose
// clock judges time for all of them (pgjournal: the database's). A
// Transport over such a Store reads the time from it, so that the times it
// writes and compares (created, due, expiry) agree across instances whose
// own clocks disagree. Now must be cheap: it is read on every call.
type Clock interface {
	Now() time.Time
}

// Durability is how durable an Update must be before it returns.
type Durability uint8

const (
	// Deferred: durable after a bounded delay, Flush, or Close.
	Deferred Durability = iota
	// Durable: durable before Update returns.
	Durable
)
