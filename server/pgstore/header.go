// header.go encodes a stored response's header fields for the header column: bytes, not
// JSON, because a field value may hold bytes that are not UTF-8 (RFC 9110's obs-text),
// which JSON and PostgreSQL's text would alter, and a replay is byte for byte.

package pgstore

import (
	"encoding/binary"
	"errors"
	"maps"
	"net/http"
	"slices"
)

// encodeHeader writes h as a sequence of (name, value) pairs, each string a uvarint
// length then its bytes; a name with several values appears once per value, in order.
// Names are sorted, so one header always encodes to the same bytes.
func encodeHeader(h http.Header) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

var errBadHeader = errors.New("pgstore: stored header fields are damaged")

// decodeHeader reads what encodeHeader wrote; nil or empty b is an empty header.
func decodeHeader(b []byte) (http.Header, error) {
	h := http.Header{}
	next := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	for len(b) > 0 {
		k, ok := next()
		if !ok {
			return nil, errBadHeader
		}
		v, ok := next()
		if !ok {
			return nil, errBadHeader
		}
		h[k] = append(h[k], v)
	}
	return h, nil
}
