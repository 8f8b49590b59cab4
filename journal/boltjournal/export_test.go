// This file lends the package's internals to its external tests (package
// boltjournal_test), which drive an idem Transport or Client over a Journal
// and then look inside the file it wrote: they cannot be in this package,
// which idem imports. Nothing but this package's tests sees these names.

package boltjournal

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The file's layout (journal.go) and size thresholds (body.go, identity_key.go).
var (
	BucketPending   = bucketPending
	BucketDone      = bucketDone
	BucketBodies    = bucketBodies
	BucketIndex     = bucketIndex
	BucketMeta      = bucketMeta
	MetaVersion     = metaVersion
	MetaIdentityKey = metaIdentityKey
)

const (
	IdentityKeySize = identityKeySize
	StageMin        = stageMin
)

// DB is j's bbolt handle.
func (j *Journal) DB() *bolt.DB { return j.db }

// HoldCommits keeps j's state changes from being committed until the
// returned function is called.
func (j *Journal) HoldCommits() (release func()) { return j.holdCommits() }

// DecodePlain reads a record's metadata as the journal stores it, unsealed;
// EncodeMeta writes it.
func DecodePlain(meta []byte) (*Record, error) { return decodePlain(meta) }
func EncodeMeta(rec *Record) ([]byte, error)   { return appendBinary(rec, nil, nil) }

// StoredBody and SetStoredBody read and replace a record's body where it is
// stored (helpers_test.go); Tamper, EditMeta and FlipLast change a closed
// file's records; JournalVersion reads its version.
func StoredBody(tx *bolt.Tx, id []byte) []byte         { return storedBodyTx(tx, id) }
func SetStoredBody(tx *bolt.Tx, id, body []byte) error { return setStoredBodyTx(tx, id, body) }
func Tamper(t *testing.T, path, op string, change func(tx *bolt.Tx, id []byte)) {
	t.Helper()
	tamper(t, path, op, change)
}
func EditMeta(t *testing.T, tx *bolt.Tx, id []byte, edit func(m map[string]any)) {
	t.Helper()
	editMeta(t, tx, id, edit)
}
func FlipLast(b []byte) []byte                        { return flipLast(b) }
func JournalVersion(t *testing.T, path string) string { t.Helper(); return journalVersion(t, path) }

// GoodJournalFile, JournalPageSize and WithDeadline are bolt_test.go's, for
// damage tests.
func GoodJournalFile(tb testing.TB) ([]byte, int64)  { tb.Helper(); return goodJournalFile(tb) }
func JournalPageSize(tb testing.TB, path string) int { tb.Helper(); return journalPageSize(tb, path) }
func WithDeadline(tb testing.TB, d time.Duration, what string, fn func()) {
	tb.Helper()
	withDeadline(tb, d, what, fn)
}

// FastJournal is helpers_test.go's journal on a RAM file system when there
// is one, closed with the test.
func FastJournal(tb testing.TB) *Journal { tb.Helper(); return fastJournal(tb) }

// StagedBody is stage_test.go's body that names id.
func StagedBody(id string, size int) []byte { return stagedBody(id, size) }

// The residue search of residue_test.go: bodies of ResidueSizes, indexed by
// BodyGrams, looked for in a closed file's buckets and raw bytes.
var ResidueSizes = residueSizes

type BodyGrams = bodyGrams

func ResidueBytes(n int) int                 { return residueBytes(n) }
func NewBodyGrams(bytes int) *BodyGrams      { return newBodyGrams(bytes) }
func (g *bodyGrams) Add(n int, body []byte)  { g.add(n, body) }
func RandomBody(tb testing.TB, n int) []byte { tb.Helper(); return randomBody(tb, n) }
func RawBodyResidue(tb testing.TB, path string, g *BodyGrams) map[int]int {
	tb.Helper()
	return rawBodyResidue(tb, path, g)
}
func RawFileResidue(tb testing.TB, path string, g *BodyGrams) int {
	tb.Helper()
	return rawFileResidue(tb, path, g)
}
