// Package boltjournal is idem's embedded journal: a journal.Store in one
// bbolt file, opened by one process at a time. Writes ahead are committed
// with fsync before Create returns, sharing each commit among the writers
// that queued meanwhile (group commit, commit.go: one goroutine runs the
// commits, from the first write until Close); settles ride the next
// commit or a flush within tens of milliseconds (deferred.go). Large bodies
// are stored in chunks and staged ahead of their record (body.go), sealed
// with AES-256-GCM under a Keyring if asked (package seal, record_seal.go).
// It is the only package of idem that imports go.etcd.io/bbolt. idem.Open
// opens one for a Client; Open here gives one for idem.NewTransport, and
// OpenReadOnly, AcceptOlderCommit and Journal's Resolve, Discard, Lookup
// and Records serve inspection and repair (the idem journal command).
//
// Layout (all keys of records are 8-byte big-endian sequence numbers, so
// inserts append):
//
//	pending  ID -> Record metadata (record_binary.go) of a pending operation: this bucket
//	         stays as small as the work in flight
//	done     ID -> Record metadata of a settled (without headers), failed or
//	         expired operation, kept for Retention; a settled operation
//	         with neither operation ID nor caller's key is written here up
//	         to a second later than its settle, with others (history.go)
//	bodies   ID -> the request body (sealed if the record names a key ID),
//	         until the operation settles, if it is over 2 KiB (smaller ones
//	         follow their record's metadata: inline.go). A body over 64 KiB
//	         is stored in chunks, ID+chunk number -> chunk (body.go)
//	index    "o\x00"+operation ID and "k\x00"+caller's key -> ID
//	meta     the journal version: 10, or 11 once a writer with
//	         Options.Encryption has opened it (version 10 plus sealed records,
//	         record_seal.go), so that an idem that cannot open them refuses
//	         the file instead of sending ciphertext as a body;
//	         "identity-key", the HMAC key of credential tags
//	         (identity_key.go); and
//	         "staged\x00"+ID while a body of 1 MiB or more is written ahead
//	         of its record (body.go)
//
// A file bbolt would open wrongly is refused before bbolt reads it
// (meta.go): with one meta page damaged, a *MetaPageError until
// AcceptOlderCommit; with both, journal.ErrCorrupt, naming the pages that
// still hold copies of the root bucket with the buckets above
// (notjournal.go). Only a file without them is ErrNotJournal.
package boltjournal
