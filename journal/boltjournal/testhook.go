// This file lends the Journal's internals to idem's own tests in other
// packages, through internal/testhook; nothing else reads them.

package boltjournal

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/idem-go/idem/internal/testhook"
	bolt "go.etcd.io/bbolt"
)

func init() {
	testhook.BoltDB = func(j any) any { return j.(*Journal).db }
	testhook.SetNow = func(j any, now func() time.Time) { j.(*Journal).now = now }
	testhook.HoldCommits = func(j any) func() { return j.(*Journal).holdCommits() }
	testhook.DecodeMeta = func(meta []byte) (any, error) { return decodePlain(meta) }
	testhook.EncodeMeta = func(rec any) ([]byte, error) { return appendBinary(rec.(*Record), nil, nil) }
	testhook.MetaJSON = metaJSON
	testhook.StoredBody = func(tx any, id []byte) []byte { return storedBodyTx(tx.(*bolt.Tx), id) }
	testhook.SetStoredBody = func(tx any, id, body []byte) error { return setStoredBodyTx(tx.(*bolt.Tx), id, body) }
	testhook.StageMin, testhook.BodyChunk, testhook.GrowStep = stageMin, bodyChunk, growStep
}

// holdCommits keeps anything from being committed (the commit loop waits
// before its next commit) until the returned function is called: deferred
// state changes stay deferred, and a write waits.
func (j *Journal) holdCommits() (release func()) {
	c := &j.commit
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.held = false
		c.idle.Broadcast()
		c.mu.Unlock()
	}
}

// metaJSON returns stored metadata in the JSON form of journals before
// version 10 (record_parse.go reads it).
func metaJSON(meta []byte) ([]byte, error) {
	s, err := unmarshalStored(meta)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// recordValue returns record id's stored value and the bucket holding it.
func recordValue(tx *bolt.Tx, id []byte) (*bolt.Bucket, []byte) {
	for _, name := range [][]byte{bucketPending, bucketDone} {
		if v := tx.Bucket(name).Get(id); v != nil {
			return tx.Bucket(name), v
		}
	}
	return nil, nil
}

// storedBodyTx returns record id's body as stored: inline or in the bodies
// bucket.
func storedBodyTx(tx *bolt.Tx, id []byte) []byte {
	if _, v := recordValue(tx, id); hasInlineBody(v) {
		_, body, _, _ := splitInline(v)
		return bytes.Clone(body)
	}
	return getBody(tx.Bucket(bucketBodies), id)
}

// setStoredBodyTx replaces record id's body where it is stored, or deletes it
// for nil, as damage to the file would.
func setStoredBodyTx(tx *bolt.Tx, id, body []byte) error {
	b, v := recordValue(tx, id)
	if !hasInlineBody(v) {
		if body == nil {
			return deleteBody(tx.Bucket(bucketBodies), id)
		}
		return tx.Bucket(bucketBodies).Put(id, body)
	}
	meta, _, _, _ := splitInline(v)
	if body == nil {
		meta = bytes.Clone(meta)
		meta[1] &^= flagInline
		return b.Put(id, meta)
	}
	return b.Put(id, withBody(meta, body))
}
