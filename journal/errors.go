// This file holds the errors a Store returns, matched with errors.Is. They
// are this package's alone: the idem package returns them as they are,
// without names of its own for them (only ErrInvalidOptions is shared).

package journal

import "errors"

var (
	// ErrLocked is returned when another process, or another handle in this
	// process, holds the journal. The wrapping error names it.
	ErrLocked = errors.New("idem: journal locked")

	// ErrCorrupt is returned when the storage is not a journal, is damaged,
	// or holds records that cannot be decoded, or whose body does not match
	// its BodySHA256. The wrapping error names the journal.
	ErrCorrupt = errors.New("idem: journal corrupt")

	// ErrClosed is returned by every Store method after Close.
	ErrClosed = errors.New("idem: journal closed")

	// ErrUnknownEncryptionKey is returned for a sealed record whose key ID is
	// not in the Store's keyring. The wrapping error names the key ID.
	ErrUnknownEncryptionKey = errors.New("idem: record sealed under an unknown key ID")

	// ErrDecrypt is returned for a sealed record whose sealed bytes fail
	// authentication: altered, damaged, moved from another record, or sealed
	// under another key than the one now under its key ID.
	ErrDecrypt = errors.New("idem: sealed record does not decrypt")

	// ErrNotFound is returned by the commands that act on an operation
	// (Resolve, Discard) when the journal has no operation by that name
	// (never had, or pruned it). Store.Get and Reload return nil and no
	// error instead.
	ErrNotFound = errors.New("idem: no such operation in the journal")

	// ErrBusy is returned for an operation that a call or resume in this
	// process holds (Claims): its outcome may be decided at any moment.
	ErrBusy = errors.New("idem: operation in flight in this process")

	// ErrFinal is returned for a change by hand to an operation whose end is
	// written already.
	ErrFinal = errors.New("idem: operation already final")
)

var (
	// ErrNameTaken is returned by Create when the operation ID or caller
	// key is already in the journal. The caller decides what that means:
	// the client reads the record there and goes on with it, or refuses a
	// different request under the same name (idem.ErrKeyReuse).
	ErrNameTaken = errors.New("idem: operation ID or idempotency key already in the journal")

	// ErrGone is returned by Update when the record it would write is no
	// longer where it was (pruned meanwhile).
	ErrGone = errors.New("idem: failed operation pruned while being sent again; call again to start it anew")
)

// ErrInvalidOptions is returned when an option holds a value with no
// meaning, or for a change to a journal opened read-only. The wrapping error
// names the option and its value.
var ErrInvalidOptions = errors.New("idem: invalid options")
