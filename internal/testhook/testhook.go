// Package testhook lends the bbolt journal's internals to idem's own tests
// in other packages (the root package's tests drive a Transport and then look
// inside the file it wrote). The journal/boltjournal package sets these
// functions at init; nothing but tests calls them. Values are passed as any
// so that this package, like every package but boltjournal, has no
// dependency on bbolt.
package testhook

import "time"

var (
	// BoltDB returns the *bbolt.DB of a *boltjournal.Journal.
	BoltDB func(j any) any
	// SetNow sets the clock a *boltjournal.Journal dates its own writes and
	// prunes by.
	SetNow func(j any, now func() time.Time)
	// HoldCommits keeps a *boltjournal.Journal's deferred state changes
	// from being committed until the returned function is called.
	HoldCommits func(j any) (release func())
	// DecodeMeta reads a record's stored metadata, as the journal wrote it
	// (unsealed), and EncodeMeta writes it.
	DecodeMeta func(meta []byte) (any, error)
	EncodeMeta func(rec any) ([]byte, error)
	// MetaJSON returns a record's stored metadata, sealed part included, as
	// the JSON form older journals hold, which the journal still reads: for
	// tests that edit a record's fields in the file.
	MetaJSON func(meta []byte) ([]byte, error)
	// StoredBody returns the body of record id as stored (sealed or not),
	// inside its record's value or in the bodies bucket, in a *bbolt.Tx;
	// SetStoredBody replaces it there, or deletes it for nil.
	StoredBody    func(tx any, id []byte) []byte
	SetStoredBody func(tx any, id, body []byte) error
	// Sizes are the journal's size thresholds: the body size from which a
	// body is staged ahead of its record, a body chunk, and the file's
	// growth step.
	StageMin, BodyChunk, GrowStep int
)
