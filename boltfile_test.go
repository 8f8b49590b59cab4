package idem

import (
	"bytes"
	"time"

	"github.com/idem-go/idem/internal/testhook"
	"github.com/idem-go/idem/journal/boltjournal"
	bolt "go.etcd.io/bbolt"
)

// These helpers let the root's tests look inside the bbolt file a Transport
// wrote (journal/boltjournal's layout: see its journal.go), through
// internal/testhook for what only a live boltjournal.Journal holds.

var (
	bucketPending   = []byte("pending")
	bucketDone      = []byte("done")
	bucketBodies    = []byte("bodies")
	bucketIndex     = []byte("index")
	bucketMeta      = []byte("meta")
	metaVersion     = []byte("version")
	metaWritten     = []byte("written")
	metaIdentityKey = []byte("identity-key")
)

const identityKeySize = 32

var (
	stageMin  = testhook.StageMin
	bodyChunk = testhook.BodyChunk
	growStep  = testhook.GrowStep
)

// boltDB is j's bbolt handle.
func boltDB(j *boltjournal.Journal) *bolt.DB { return testhook.BoltDB(j).(*bolt.DB) }

// openBolt opens a closed journal's file with bbolt itself.
func openBolt(path string, timeout time.Duration, readOnly bool) (*bolt.DB, error) {
	return bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: readOnly})
}

// setJournalNow sets the clock j dates its own writes and prunes by.
func setJournalNow(j *boltjournal.Journal, now func() time.Time) { testhook.SetNow(j, now) }

// holdCommits keeps j's deferred state changes from being committed until
// the returned function is called.
func holdCommits(j *boltjournal.Journal) (release func()) { return testhook.HoldCommits(j) }

// decodePlain reads a record's metadata as the journal stores it.
func decodePlain(meta []byte) (*Record, error) {
	rec, err := testhook.DecodeMeta(meta)
	r, _ := rec.(*Record)
	return r, err
}

// encodeMeta writes a record's metadata as the journal stores it.
func encodeMeta(rec *Record) ([]byte, error) { return testhook.EncodeMeta(rec) }

// pendingRecord is a minimal pending record with key.
func pendingRecord(key string) *Record {
	return &Record{Key: key, Method: "POST", URL: "http://127.0.0.1/payments", State: StatePending}
}

// stagedBody is a body of size bytes made of id, so that a wrong part shows.
func stagedBody(id string, size int) []byte {
	return bytes.Repeat([]byte(id+"|"), size/(len(id)+1)+1)[:size]
}
