// This file holds the contract floor resume: the floor resume
// (floorresume.go) of the contract floor's records (floor_contract.go),
// doing what Resume's contract asks of each and nothing more: it reads the
// record in idem's binary form, refuses a body that does not hash to the
// record's SHA-256, re-sends it with its key and headers as one attempt of
// the contract (floor_attempt.go), and on a 201
// settles it as idem does, the write-ahead deleted and a settled record owed
// to the done bucket.

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// makeContractBacklog is makeFloorBacklog with the contract floor's
// write-aheads, packed as idem packs its pending bucket.
func makeContractBacklog(path, url string, body []byte, n int) error {
	op := &contractOp{method: http.MethodPost, url: url, contentType: "application/json",
		header: http.Header{"Content-Type": {"application/json"}}, sum: sha256.Sum256(body)}
	return writeBacklog(path, n, 0.9, func(i uint64) []byte {
		binary.BigEndian.PutUint64(op.key[:], i) // distinct keys; randomness is not the point here
		op.created = time.Now().UTC()
		op.updated = op.created
		return op.pendingValue(body)
	})
}

var errContractRecord = errors.New("not a contract floor record")

// parseContract reads a value pendingValue wrote: the record and its body
// (v's memory).
func parseContract(v []byte) (op contractOp, body []byte, err error) {
	if len(v) < 6 || v[0] != 0x01 || v[1] != 2|4|8|16 {
		return op, nil, errContractRecord
	}
	n := binary.LittleEndian.Uint32(v[len(v)-4:])
	if uint64(n) > uint64(len(v)-6) {
		return op, nil, errContractRecord
	}
	body = v[len(v)-4-int(n) : len(v)-4]
	d := &binReader{b: v[2 : len(v)-4-int(n)], ok: true}
	copy(op.key[:], d.take(16))
	d.str() // operation ID
	op.method, op.url = string(d.str()), string(d.str())
	d.str() // host
	if names := d.uvarint(); names > 0 {
		op.header = make(http.Header, names)
		for range names {
			k := string(d.str())
			vals := make([]string, max(d.uvarint(), 1)-1)
			for i := range vals {
				vals[i] = string(d.str())
			}
			op.header[k] = vals
		}
	}
	d.take(3 + 16) // dropped, dropped query, identity; the credential tag
	op.contentType = string(d.str())
	d.str() // content encoding
	copy(op.sum[:], d.take(32))
	if !d.ok {
		return op, nil, errContractRecord
	}
	return op, body, nil
}

// binReader reads strings and uvarints from b; ok turns false, for good,
// at the first read past its end.
type binReader struct {
	b  []byte
	ok bool
}

func (d *binReader) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.b, d.ok = nil, false
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *binReader) take(n int) []byte {
	if n > len(d.b) {
		d.b, d.ok = nil, false
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *binReader) str() []byte {
	n := d.uvarint()
	if !d.ok || n > uint64(len(d.b)) {
		d.ok = false
		return nil
	}
	return d.take(int(n))
}

// resendContract sends one contract record again, under its key, and
// settles it, as Resume does, once answered 201.
func (f *floorTransport) resendContract(ctx context.Context, it floorItem) error {
	op, body, err := parseContract(it.val)
	if err != nil {
		return fmt.Errorf("floor record %x: %w", it.key, err)
	}
	if sha256.Sum256(body) != op.sum {
		return fmt.Errorf("floor record %x: body does not match its SHA-256", it.key)
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, op.method, op.url, bytes.NewReader(body))
	if err != nil {
		cancel()
		return err
	}
	req.Header = op.header
	req.Header.Set("Idempotency-Key", uuidString(op.key))
	op.lastAttempt = time.Now().UTC()
	resp, err := sendAttempt(f.base, req, cancel, true)
	if err != nil {
		return err
	}
	if err := drain(resp, http.StatusCreated); err != nil {
		return err
	}
	op.settled, op.status, op.updated, op.header = true, resp.StatusCode, time.Now().UTC(), nil
	f.settleContract(it.key, op.appendMeta(make([]byte, 0, 176+len(op.url))))
	return nil
}
