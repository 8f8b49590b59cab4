// encode.go turns what the scripts (scripts.go) store and return into server types and
// back: the header encoding of a stored response, the reply of a claim that found a
// record, tokens and durations in milliseconds.

package redisstore

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/idem-go/idem/server"
)

// errCorrupt is wrapped by the error for a record the Store cannot read back: written by
// something else, or by an incompatible version. The middleware fails closed on it.
var errCorrupt = errors.New("redisstore: corrupt record")

// encodeHeader writes h as a compact binary string: for each field, its name and its
// count of values, then each value, every string preceded by its length as a uvarint.
// Values keep their order and any byte (obs-text included); field order does not matter.
func encodeHeader(h http.Header) []byte {
	var b []byte
	for k, vs := range h {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// decodeHeader reads what encodeHeader wrote; an empty string is a nil Header.
func decodeHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	h := http.Header{}
	str := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	for len(b) > 0 {
		k, ok := str()
		if !ok {
			return nil, fmt.Errorf("%w: header field name", errCorrupt)
		}
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)) { // each value takes at least one byte
			return nil, fmt.Errorf("%w: header field %q", errCorrupt, k)
		}
		b = b[w:]
		vs := make([]string, 0, n)
		for range n {
			v, ok := str()
			if !ok {
				return nil, fmt.Errorf("%w: header field %q", errCorrupt, k)
			}
			vs = append(vs, v)
		}
		h[k] = vs
	}
	return h, nil
}

// decodeRecord reads the reply of claimScript that found a record: {0, lease left ms,
// PTTL ms, st, fp, tok, status, hdr, body, unrep}.
func decodeRecord(reply []any) (server.Record, error) {
	if len(reply) != 10 {
		return server.Record{}, fmt.Errorf("%w: claim reply of %d elements", errCorrupt, len(reply))
	}
	left, _ := reply[1].(int64)
	pttl, _ := reply[2].(int64)
	str := func(i int) string { s, _ := reply[i].(string); return s }
	rec := server.Record{Fingerprint: str(4), ExpiresIn: time.Duration(pttl) * time.Millisecond}
	switch str(3) {
	case "p":
		rec.State, rec.Token = server.StateInProgress, str(5)
		rec.LeaseLeft = time.Duration(left) * time.Millisecond
	case "d":
		status, err := strconv.Atoi(str(6))
		if err != nil {
			return server.Record{}, fmt.Errorf("%w: status %q", errCorrupt, str(6))
		}
		h, err := decodeHeader([]byte(str(7)))
		if err != nil {
			return server.Record{}, err
		}
		rec.State = server.StateDone
		rec.Response = &server.Response{Status: status, Header: h, Body: []byte(str(8)), Unreplayable: str(9)}
	default:
		return server.Record{}, fmt.Errorf("%w: state %q", errCorrupt, str(3))
	}
	return rec, nil
}

// newToken returns a random token of 130 bits (crypto/rand.Text): never used before for
// any Scope, with overwhelming probability, even across a record's deletion and expiry,
// which a counter kept in the record's own hash would not survive.
func newToken() string {
	return rand.Text()
}

// ms is d in whole milliseconds, rounded up and at least 1: Redis's unit, and PEXPIRE 0
// would delete the record at once.
func ms(d time.Duration) int64 {
	return max(1, int64((d+time.Millisecond-1)/time.Millisecond))
}
