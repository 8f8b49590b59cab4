// This file is the root's side of storage: the bbolt journal that Open
// uses by default (package journal/boltjournal), under the names idem has
// always given it, and the Store a Transport journals to (journal.Store).

package idem

import (
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/seal"
)

type (
	// Journal is the embedded default Store: a bbolt file opened by one
	// process at a time (boltjournal.Journal). It is safe for concurrent
	// use. Close it when done.
	Journal = boltjournal.Journal

	// Keyring holds the keys that seal what the journal stores of each
	// request (JournalOptions.Encryption); see seal.Keyring, which
	// pgjournal.Options.Encryption takes too.
	Keyring = seal.Keyring

	// MetaPageError is returned when one of the journal file's two bbolt
	// meta pages is damaged; see boltjournal.MetaPageError and
	// AcceptOlderCommit.
	MetaPageError = boltjournal.MetaPageError

	// OperationRef names one operation in a journal, for Journal.Resolve
	// and Journal.Discard: by its operation ID (WithOperationID), or by its
	// idempotency key (Record.Key, as `idem journal ls` and Outcome.Record
	// show it, whether the caller chose it or idem minted it). Exactly one
	// of the two must be set.
	OperationRef = journal.Name
)

// EncryptionKeySize is the length, in bytes, of every key in a Keyring:
// AES-256.
const EncryptionKeySize = seal.KeySize

// JournalOptions configure the bbolt journal (boltjournal.Options):
// Encryption (a Keyring sealing what each record holds of its request),
// Retention (how long finished records are kept; DefaultRetention) and
// OpenTimeout (the wait for the file lock; DefaultOpenTimeout). The zero
// value is a plaintext journal with the defaults.
type JournalOptions = boltjournal.Options

// OpenJournal opens or creates the journal file at path (mode 0600) for
// writing (boltjournal.Open). While it is open, finished records older than
// Retention are pruned after a commit, at most once every 10 minutes. It
// returns an error matching ErrJournalLocked if another process or another
// Journal in this process holds the file (after OpenTimeout),
// ErrJournalCorrupt if the file is not a readable journal (a *MetaPageError
// if it would open one commit older; io.ErrUnexpectedEOF too if it is
// truncated), and ErrInvalidOptions for invalid opts. With Encryption,
// records written from now on are sealed under its Current key, and records
// sealed under any of its Keys can be read. A nil opts means the defaults.
func OpenJournal(path string, opts *JournalOptions) (*Journal, error) {
	return boltjournal.Open(path, opts)
}

// OpenJournalReadOnly opens an existing journal for inspection
// (boltjournal.OpenReadOnly). It shares the file with other readers but not
// with a writer: while an application holds the journal it returns
// ErrJournalLocked after timeout (0 means DefaultOpenTimeout). It has no
// Keyring: sealed records are listed with Record.Sealed set, and Lookup of
// one returns ErrUnknownEncryptionKey.
func OpenJournalReadOnly(path string, timeout time.Duration) (*Journal, error) {
	return boltjournal.OpenReadOnly(path, timeout)
}

// AcceptOlderCommit makes the journal at path open as of the commit its
// intact meta page names, when the other is damaged: see
// boltjournal.AcceptOlderCommit. Reconcile with the server first: what the
// lost commit wrote is gone for good.
func AcceptOlderCommit(path string, timeout time.Duration) (*MetaPageError, error) {
	return boltjournal.AcceptOlderCommit(path, timeout)
}

// RecordID returns rec's sequence number in the journal file it was read
// from: its key there, in creation order, as `idem journal` shows it. 0 for
// a record no journal returned.
func RecordID(rec *Record) uint64 { return boltjournal.RecordID(rec) }
