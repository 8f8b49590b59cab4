// This file lends the Journal's internals to idem's own tests in other
// packages, through internal/testhook; nothing else reads them.

package boltjournal

import (
	"encoding/json"
	"time"

	"github.com/idem-go/idem/internal/testhook"
)

func init() {
	testhook.BoltDB = func(j any) any { return j.(*Journal).db }
	testhook.SetNow = func(j any, now func() time.Time) { j.(*Journal).now = now }
	testhook.HoldCommits = func(j any) func() { return j.(*Journal).holdCommits() }
	testhook.DecodeMeta = func(meta []byte) (any, error) { return decodePlain(meta) }
	testhook.EncodeMeta = func(rec any) ([]byte, error) { return appendBinary(rec.(*Record), nil, nil) }
	testhook.MetaJSON = metaJSON
	testhook.StageMin, testhook.BodyChunk, testhook.GrowStep = stageMin, bodyChunk, growStep
}

// holdCommits keeps deferred state changes from being committed (the flush
// timer finds a commit running) until the returned function is called.
func (j *Journal) holdCommits() (release func()) {
	c := &j.commit
	c.mu.Lock()
	c.leading = true
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.leading = false
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
