// This file holds the journal's newest time: the latest time a record in the
// file was written at (Record.written), kept in the meta bucket and raised
// by the commit that writes a later one. A Transport's clock (clockstep.go)
// starts from it, so that after the wall clock was set back while the
// process was down, the first operation written ahead is not dated before
// records already in the file, to look days old once Resume reads them.

package boltjournal

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// metaWritten names the newest time, in Unix nanoseconds (8 bytes, big
// endian), in the meta bucket. A file written before it existed is scanned
// once, at open, and the key written by a writer's open.
var metaWritten = []byte("written")

// latestWritten returns the newest time the journal holds or has been
// given to write; zero if none.
func (j *Journal) latestWritten() time.Time {
	n := j.written.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// sawWritten raises the journal's newest time to t, a time written or about
// to be.
func (j *Journal) sawWritten(t time.Time) {
	if t.IsZero() {
		return
	}
	raise(&j.written, t.UnixNano())
}

// writtenStep is the granularity of the newest time kept in the file: it is
// stored rounded up to a whole step, so that a busy journal writes it about
// once a step instead of in every commit (each write opens the meta bucket:
// a dozen allocations a commit). Reopened, LatestWritten may read up to a
// step later than the newest record; it is never earlier.
const writtenStep = int64(time.Second)

// raiseWritten stores t in tx, rounded up to writtenStep, as the journal's
// newest time, unless the file holds that or later already. It returns the
// value it stored, 0 if none, for noteFileWritten once tx has committed. In
// a small meta bucket (bbolt keeps it inline, in the page of the bucket
// list every commit writes anyway) it costs the commit no page.
func (j *Journal) raiseWritten(tx *bolt.Tx, t time.Time) (int64, error) {
	n := t.UnixNano()
	if t.IsZero() || n <= j.fileWritten.Load() {
		return 0, nil
	}
	if n > 0 {
		n += writtenStep - 1
		n -= n % writtenStep
	}
	meta := tx.Bucket(bucketMeta)
	if old := meta.Get(metaWritten); len(old) == 8 && int64(binary.BigEndian.Uint64(old)) >= n {
		return int64(binary.BigEndian.Uint64(old)), nil
	}
	return n, meta.Put(metaWritten, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// noteFileWritten records that the file holds n as its newest time.
func (j *Journal) noteFileWritten(n int64) { raise(&j.fileWritten, n) }

// raise sets v to n unless it holds n or more already.
func raise(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// loadWritten reads the newest time at open. A file without it (written by
// an idem before it) is scanned for its records' times; a writer stores
// what it finds.
func (j *Journal) loadWritten(tx *bolt.Tx) error {
	if v := tx.Bucket(bucketMeta).Get(metaWritten); len(v) == 8 {
		j.written.Store(int64(binary.BigEndian.Uint64(v)))
		j.fileWritten.Store(int64(binary.BigEndian.Uint64(v)))
		return nil
	}
	var newest time.Time
	for _, name := range [][]byte{bucketPending, bucketDone} {
		err := tx.Bucket(name).ForEach(func(_, v []byte) error {
			// A record that cannot be read is reported by the reads that
			// need it; its times are not counted here.
			if r, err := decodePlain(v); err == nil && r.Written().After(newest) {
				newest = r.Written()
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if newest.IsZero() {
		return nil
	}
	j.written.Store(newest.UnixNano())
	if j.readOnly {
		return nil
	}
	n, err := j.raiseWritten(tx, newest)
	j.noteFileWritten(n) // a failed open leaves no Journal to use it
	return err
}
