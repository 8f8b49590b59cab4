// This file holds the contract floor: the floor client (floor.go) doing the
// work idem's contract asks of a journaled POST, and nothing more. Beside
// the bare floor's put and delete it mints a random UUID key (crypto/rand),
// hashes the body (SHA-256), writes ahead the record the design lists (key,
// method, URL, non-sensitive headers, body, its SHA-256, created time,
// state) in the bytes of idem's bbolt journal (boltjournal's binary form,
// body inline), and on settle keeps a settled record of those bytes
// (status, attempts, times; no headers or body) for Retention, written many
// at a time as idem's history is: with the commit after 64 KiB are owed, or
// one second after the oldest. It sends the POST as one attempt of idem's
// contract (floor_attempt.go). It leaves out idem's own work around the
// attempt: httptrace, the Observer, ResponseInfo, the retry budget, and
// what a failed attempt takes (its error's classification, the retries).

package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"slices"
	"time"
)

const contractRow = "contract floor POST"

const (
	// contractHistoryDelay and contractHistoryMax are idem's historyDelay
	// and historyMax (journal/boltjournal/history.go).
	contractHistoryDelay = time.Second
	contractHistoryMax   = 64 << 10
)

var floorDoneBucket = []byte("done")

// contractOp is what the contract floor journals of one POST.
type contractOp struct {
	key                           [16]byte // a UUID, version 4
	method, url, contentType      string
	header                        http.Header // non-sensitive headers: the write-ahead's, not the settled record's
	sum                           [32]byte
	created, lastAttempt, updated time.Time
	settled                       bool
	status                        int
}

// appendMeta appends op's metadata in boltjournal's binary form
// (record_binary.go) as idem writes it for such a POST: a minted key, no
// operation ID, host override, other headers, identity or sealing; the
// credential tag's 16 bytes (an HMAC in idem) are zeros here.
func (op *contractOp) appendMeta(b []byte) []byte {
	const flagRawSHA, flagRawKey, flagRawCred = 2, 4, 8
	b = append(b, 0x01, flagRawSHA|flagRawKey|flagRawCred)
	b = append(b, op.key[:]...)
	b = append(b, 0) // operation ID
	b = appendFloorString(b, op.method)
	b = appendFloorString(b, op.url)
	b = append(b, 0) // host
	b = appendFloorHeader(b, op.header)
	b = append(b, 0, 0, 0) // dropped, dropped query, identity
	b = append(b, make([]byte, 16)...)
	b = appendFloorString(b, op.contentType)
	b = append(b, 0) // content encoding
	b = append(b, op.sum[:]...)
	b = appendFloorTime(b, op.created)
	state, attempts := byte(1), int64(0)
	if op.settled {
		state, attempts = 2, 1
	}
	b = append(b, state)
	b = binary.AppendVarint(b, attempts)
	b = appendFloorTime(b, op.lastAttempt)
	b = append(b, 0) // next attempt
	b = binary.AppendVarint(b, int64(op.status))
	b = append(b, 0) // last error
	b = appendFloorTime(b, op.updated)
	return append(b, 0, 0, 0) // key ID, location, sealed part
}

// pendingValue is the write-ahead's value: the metadata marked as holding
// its body, the body, and the body's length (boltjournal's inline.go).
func (op *contractOp) pendingValue(body []byte) []byte {
	v := op.appendMeta(make([]byte, 0, 256+len(op.url)+len(body)))
	v[1] |= 16
	v = append(v, body...)
	return binary.LittleEndian.AppendUint32(v, uint32(len(body)))
}

func appendFloorString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendFloorHeader appends h, names sorted, as the binary form does,
// leaving out the headers idem never journals.
func appendFloorHeader(b []byte, h http.Header) []byte {
	names := make([]string, 0, len(h))
	for k := range h {
		switch k {
		case "Authorization", "Proxy-Authorization", "Cookie":
		default:
			names = append(names, k)
		}
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, k := range names {
		b = appendFloorString(b, k)
		b = binary.AppendUvarint(b, uint64(len(h[k]))+1)
		for _, v := range h[k] {
			b = appendFloorString(b, v)
		}
	}
	return b
}

// appendFloorTime appends t as the binary form does a UTC time; zero as 0.
func appendFloorTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = binary.AppendVarint(append(b, 1), t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// uuidString is key in the canonical form, as idem sends a key it minted.
func uuidString(key [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], key[0:4])
	hex.Encode(s[9:13], key[4:6])
	hex.Encode(s[14:18], key[6:8])
	hex.Encode(s[19:23], key[8:10])
	hex.Encode(s[24:], key[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}

// roundTripContract is RoundTrip for the contract floor.
func (f *floorTransport) roundTripContract(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	op := &contractOp{method: req.Method, url: req.URL.String(), contentType: req.Header.Get("Content-Type"), header: req.Header,
		sum: sha256.Sum256(body), created: time.Now().UTC()}
	op.updated = op.created
	if _, err := rand.Read(op.key[:]); err != nil {
		return nil, err
	}
	op.key[6] = op.key[6]&0x0f | 0x40 // version 4
	op.key[8] = op.key[8]&0x3f | 0x80 // RFC 9562 variant
	id := binary.BigEndian.AppendUint64(nil, f.seq.Add(1))
	if err := f.q.put(floorPut{id, op.pendingValue(body)}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	out := withKey(ctx, req, uuidString(op.key), body)
	op.lastAttempt = time.Now().UTC()
	resp, err := sendAttempt(f.base, out, cancel, true)
	if err == nil {
		op.settled, op.status, op.updated, op.header = true, resp.StatusCode, time.Now().UTC(), nil
		f.settleContract(id, op.appendMeta(make([]byte, 0, 176+len(op.url))))
	}
	return resp, err
}

// settleContract queues the delete of the write-ahead id for the next
// commit and owes its settled record to the done bucket.
func (f *floorTransport) settleContract(id, settled []byte) {
	f.q.settle(id)
	f.owedMu.Lock()
	if len(f.owed) == 0 {
		f.owedSince = time.Now()
		f.q.armLater()
	}
	f.owed = append(f.owed, floorPut{key: id, val: settled})
	f.owedBytes += len(settled)
	f.owedMu.Unlock()
}

// takeOwed returns the owed settled records if it is time to write them:
// force (Close), contractHistoryDelay passed, or contractHistoryMax bytes
// owed.
func (f *floorTransport) takeOwed(force bool) []floorPut {
	f.owedMu.Lock()
	defer f.owedMu.Unlock()
	if len(f.owed) == 0 || !force && f.owedBytes < contractHistoryMax && time.Since(f.owedSince) < contractHistoryDelay {
		return nil
	}
	owed := f.owed
	f.owed, f.owedBytes = nil, 0
	return owed
}
