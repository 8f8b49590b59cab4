// This file holds the floor client: the least a durable bbolt write-ahead
// client can do, measured in the same rounds as idem to judge idem against
// the disk rather than against plain net/http. One committer goroutine
// (groupcommit.go) drains every queued write into one db.Update with no
// fixed delay; a POST
// puts a small record (method, URL, content type, body) under a
// time-ordered key and is not sent before that commit returned; its settle
// is a delete that rides the next commit, or a flush about 10 ms later.

package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

const floorRow = "floor POST"

// floorFlush is how long a settle may wait for a write to ride along.
const floorFlush = 10 * time.Millisecond

var floorBucket = []byte("ops")

// floorTransport is the floor client's RoundTripper. It is safe for
// concurrent use.
type floorTransport struct {
	db   *bolt.DB
	base http.RoundTripper
	seq  atomic.Uint64

	// contract makes it the contract floor (floor_contract.go), which
	// also owes settled records to the done bucket.
	contract bool

	q *groupCommitter[floorPut, []byte] // write-aheads; settles are the keys to delete

	owedMu    sync.Mutex
	owed      []floorPut // settled records for the done bucket (contract)
	owedBytes int
	owedSince time.Time // when the oldest of owed was settled

	commits, writeAheads atomic.Uint64
	commitTime           atomic.Int64 // nanoseconds in db.Update
	closeOnce            sync.Once
	closeErr             error
}

// floorPut is a record to put: a write-ahead, or a settled record (contract).
type floorPut struct{ key, val []byte }

func newFloor(path string, base http.RoundTripper) (*floorTransport, error) {
	return openFloor(path, base, false)
}

// newContractFloor opens the contract floor (floor_contract.go).
func newContractFloor(path string, base http.RoundTripper) (*floorTransport, error) {
	return openFloor(path, base, true)
}

func openFloor(path string, base http.RoundTripper, contract bool) (*floorTransport, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(floorDoneBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(floorBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	f := &floorTransport{db: db, base: base, contract: contract}
	f.seq.Store(uint64(time.Now().UnixNano()))
	f.q = newGroupCommitter[floorPut, []byte](floorFlush, contractHistoryDelay, f.commit)
	return f, nil
}

func (f *floorTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.contract {
		return f.roundTripContract(req)
	}
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	key := binary.BigEndian.AppendUint64(nil, f.seq.Add(1))
	if err := f.q.put(floorPut{key, floorRecord(req.Method, req.URL.String(), req.Header.Get("Content-Type"), body)}); err != nil {
		return nil, err
	}
	resp, err := f.base.RoundTrip(withKey(req.Context(), req, hex.EncodeToString(key), body))
	if err == nil {
		f.q.settle(key)
	}
	return resp, err
}

// floorRecord is the floor's record of a request: its method, URL and
// content type, a line each, then its body.
func floorRecord(method, url, contentType string, body []byte) []byte {
	rec := make([]byte, 0, len(method)+len(url)+len(contentType)+3+len(body))
	rec = append(append(rec, method...), '\n')
	rec = append(append(rec, url...), '\n')
	rec = append(append(rec, contentType...), '\n')
	return append(rec, body...)
}

// parseFloorRecord splits a floorRecord; ok is false if it is not one.
func parseFloorRecord(rec []byte) (method, url, contentType string, body []byte, ok bool) {
	var lines [3][]byte
	for i := range lines {
		var found bool
		if lines[i], rec, found = bytes.Cut(rec, []byte("\n")); !found {
			return "", "", "", nil, false
		}
	}
	return string(lines[0]), string(lines[1]), string(lines[2]), rec, true
}

// commit commits what is queued, and the owed settled records when due
// (all of them if force): the group committer's commit.
func (f *floorTransport) commit(force bool) {
	puts, deletes, _ := f.q.take(0)
	owed := f.takeOwed(force)
	if len(puts) == 0 && len(deletes) == 0 && len(owed) == 0 {
		return
	}
	start := time.Now()
	err := f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(floorBucket)
		if f.contract {
			b.FillPercent = 0.9 // keys appended in order, packed as idem packs its pending bucket
		}
		for _, p := range puts {
			if err := b.Put(p.p.key, p.p.val); err != nil {
				return err
			}
		}
		for _, k := range deletes {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		done := tx.Bucket(floorDoneBucket)
		done.FillPercent = 0.9 // keys appended in order, as idem's done bucket
		for _, o := range owed {
			if err := done.Put(o.key, o.val); err != nil {
				return err
			}
		}
		return nil
	})
	f.commitTime.Add(int64(time.Since(start)))
	f.commits.Add(1)
	f.writeAheads.Add(uint64(len(puts)))
	release(puts, err)
}

// stats returns the floor's counters so far.
func (f *floorTransport) stats() journalCounts {
	st := f.db.Stats()
	return journalCounts{f.commits.Load(), f.writeAheads.Load(), uint64(st.TxStats.GetWrite()),
		time.Duration(f.commitTime.Load()), st.TxStats.GetWriteTime()}
}

// Close commits what is queued and closes the file; later calls do
// nothing.
func (f *floorTransport) Close() error {
	f.closeOnce.Do(func() {
		f.q.Close()
		f.closeErr = f.db.Close()
	})
	return f.closeErr
}
