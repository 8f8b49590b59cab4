// This file holds the floor client: the least a durable bbolt write-ahead
// client can do, measured in the same rounds as idem to judge idem against
// the disk rather than against plain net/http. One committer goroutine
// drains every queued write into one db.Update with no fixed delay; a POST
// puts a small record (method, URL, content type, body) under a
// time-ordered key and is not sent before that commit returned; its settle
// is a delete that rides the next commit, or a flush about 10 ms later.

package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
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

	mu        sync.Mutex
	puts      []floorPut
	deletes   [][]byte
	owed      []floorPut // settled records for the done bucket (contract)
	owedBytes int
	owedSince time.Time     // when the oldest of owed was settled
	wake      chan struct{} // one token: a put waits
	armed     chan struct{} // one token: a first delete waits, flush within floorFlush
	owedArmed chan struct{} // one token: a first owed record waits, written within contractHistoryDelay
	stop      chan struct{}
	done      chan struct{}

	commits, writeAheads atomic.Uint64
	commitTime           atomic.Int64 // nanoseconds in db.Update
	closeOnce            sync.Once
	closeErr             error
}

type floorPut struct {
	key, val []byte
	done     chan error
}

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
	f := &floorTransport{db: db, base: base, contract: contract, wake: make(chan struct{}, 1), armed: make(chan struct{}, 1),
		owedArmed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	f.seq.Store(uint64(time.Now().UnixNano()))
	go f.commitLoop()
	return f, nil
}

func (f *floorTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.contract {
		return f.roundTripContract(req)
	}
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	key := binary.BigEndian.AppendUint64(nil, f.seq.Add(1))
	if err := f.put(key, floorRecord(req.Method, req.URL.String(), req.Header.Get("Content-Type"), body)); err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set("Idempotency-Key", hex.EncodeToString(key))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	resp, err := f.base.RoundTrip(out)
	if err == nil {
		f.settle(key)
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

// put queues a write and waits for the commit that carries it.
func (f *floorTransport) put(key, val []byte) error {
	done := make(chan error, 1)
	f.mu.Lock()
	f.puts = append(f.puts, floorPut{key: key, val: val, done: done})
	f.mu.Unlock()
	poke(f.wake)
	return <-done
}

// settle queues the delete of key for the next commit.
func (f *floorTransport) settle(key []byte) {
	f.mu.Lock()
	f.deletes = append(f.deletes, key)
	first := len(f.deletes) == 1
	f.mu.Unlock()
	if first {
		poke(f.armed)
	}
}

// poke puts the token in ch unless it is there.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// commitLoop commits whatever is queued, as soon as there is a put, or
// floorFlush after a delete with no put to ride, or contractHistoryDelay
// after a settled record was first owed.
func (f *floorTransport) commitLoop() {
	defer close(f.done)
	flush, history := time.NewTimer(time.Hour), time.NewTimer(time.Hour)
	flush.Stop()
	history.Stop()
	for {
		select {
		case <-f.wake:
			f.commit(false)
		case <-f.armed:
			flush.Reset(floorFlush)
		case <-flush.C:
			f.commit(false)
		case <-f.owedArmed:
			history.Reset(contractHistoryDelay)
		case <-history.C:
			f.commit(false)
		case <-f.stop:
			f.commit(true)
			return
		}
	}
}

// commit commits what is queued, and the owed settled records when due
// (all of them if force).
func (f *floorTransport) commit(force bool) {
	f.mu.Lock()
	puts, deletes, owed := f.puts, f.deletes, f.takeOwed(force)
	f.puts, f.deletes = nil, nil
	f.mu.Unlock()
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
			if err := b.Put(p.key, p.val); err != nil {
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
	for _, p := range puts {
		p.done <- err
	}
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
		close(f.stop)
		<-f.done
		f.closeErr = f.db.Close()
	})
	return f.closeErr
}
