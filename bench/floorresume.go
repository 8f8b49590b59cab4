// This file holds the floor of the resume figure: the least a durable bbolt
// client can do to re-send its backlog after a restart, run in the same
// rounds as Resume. Its backlog is the floor client's (floor.go) records of
// the same POSTs. It reads its file in order once, in the background, as
// idem's journal does when opened (so that a cold file is not read a page
// fault at a time); it reads the records a page at a time, each page in one
// read transaction, sends them conc at a time, and settles each with a delete
// that the floor's committer flushes within floorFlush. It keeps no state
// and reports nothing: what it costs beyond plain net/http is the journal's
// reads and deletes.

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
	bolt "go.etcd.io/bbolt"
)

// floorPage is how many records the floor resume reads per transaction,
// as idem's bbolt journal reads a page of its pending records.
const floorPage = 256

// makeFloorBacklog writes n floor records of a POST of body to url into a new
// file at path, under keys 1..n: the floor client's record, in a file
// written in order and so more compact than a journal that concurrent POSTs
// wrote.
func makeFloorBacklog(path, url string, body []byte, n int) error {
	rec := floorRecord(http.MethodPost, url, "application/json", body)
	return writeBacklog(path, n, 0, func(uint64) []byte { return rec })
}

// writeBacklog writes n records into the floor bucket of a new bbolt file at
// path, under keys 1..n (8 bytes, big-endian), 10,000 per transaction; val
// returns record i's value. fill is the bucket's FillPercent, 0 for bbolt's
// default.
func writeBacklog(path string, n int, fill float64, val func(i uint64) []byte) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	const batch = 10000
	for from := 0; from < n && err == nil; from += batch {
		err = db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(floorBucket)
			if err != nil {
				return err
			}
			if fill > 0 {
				b.FillPercent = fill
			}
			for i := uint64(from) + 1; i <= uint64(min(n, from+batch)); i++ {
				if err := b.Put(binary.BigEndian.AppendUint64(nil, i), val(i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// floorItem is a record the floor resume read: its key and value, copied
// out of the read transaction.
type floorItem struct{ key, val []byte }

// floorResume re-sends every record in the floor file at path, which holds
// n, through base, conc at a time, and returns how long that took and the
// CPU it cost (the final flush of deletes, on close, is not timed: Resume's
// is not either).
func floorResume(ctx context.Context, path string, base http.RoundTripper, n, conc int) (sendRun, error) {
	return floorResumeOf(ctx, path, base, n, conc, false)
}

// floorResumeOf is floorResume, of the contract floor's records
// (floorresume_contract.go) if contract.
func floorResumeOf(ctx context.Context, path string, base http.RoundTripper, n, conc int, contract bool) (sendRun, error) {
	f, err := openFloor(path, base, contract)
	if err != nil {
		return sendRun{}, err
	}
	resend := f.resend
	if contract {
		resend = f.resendContract
	}
	defer f.Close()
	work := make(chan floorItem, floorPage)
	errs := make([]error, conc)
	var wg sync.WaitGroup
	var failed atomic.Bool
	t0, cpu0, alloc0 := time.Now(), harness.ProcessCPU(), allocsNow()
	wg.Go(func() { readInOrder(path) })
	for i := range conc {
		wg.Go(func() {
			for it := range work {
				if errs[i] == nil {
					if errs[i] = resend(ctx, it); errs[i] != nil {
						failed.Store(true)
					}
				}
			}
		})
	}
	var after []byte
	read := 0
	for {
		page, err := f.readPage(after)
		if err != nil {
			close(work)
			wg.Wait()
			return sendRun{}, err
		}
		read += len(page)
		for _, it := range page {
			work <- it
		}
		if len(page) < floorPage || failed.Load() {
			break
		}
		after = page[len(page)-1].key
	}
	close(work)
	wg.Wait()
	sent := sendRun{took: time.Since(t0), cpu: harness.ProcessCPU() - cpu0, alloc: alloc0.since()}
	for _, err := range errs {
		if err != nil {
			return sendRun{}, err
		}
	}
	if read != n {
		return sendRun{}, fmt.Errorf("floor resume of %s: read %d records, want %d", path, read, n)
	}
	return sent, f.Close()
}

// readPage reads up to floorPage records with keys above after (nil: from
// the first), copied into one buffer.
func (f *floorTransport) readPage(after []byte) ([]floorItem, error) {
	page := make([]floorItem, 0, floorPage)
	err := f.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(floorBucket).Cursor()
		k, v := c.First()
		if after != nil {
			if k, v = c.Seek(after); bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		size := 0
		for ; k != nil && len(page) < floorPage; k, v = c.Next() {
			page = append(page, floorItem{k, v})
			size += len(k) + len(v)
		}
		buf := make([]byte, 0, size)
		for i, it := range page {
			buf = append(buf, it.key...)
			buf = append(buf, it.val...)
			end := len(buf)
			mid := end - len(it.val)
			page[i] = floorItem{key: buf[mid-len(it.key) : mid : mid], val: buf[mid:end:end]}
		}
		return nil
	})
	return page, err
}

// resend sends one record again, under its key, and settles it once
// answered 201.
func (f *floorTransport) resend(ctx context.Context, it floorItem) error {
	method, url, contentType, body, ok := parseFloorRecord(it.val)
	if !ok {
		return fmt.Errorf("floor record %x: not a record", it.key)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", hex.EncodeToString(it.key))
	resp, err := f.base.RoundTrip(req)
	if err != nil {
		return err
	}
	if err := drain(resp, http.StatusCreated); err != nil {
		return err
	}
	f.q.settle(it.key)
	return nil
}

// readInOrder reads the file at path once, from start to end, so that the
// page cache holds it; an error only ends the read.
func readInOrder(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	for {
		if _, err := f.Read(buf); err != nil {
			return // io.EOF at the end
		}
	}
}
