// headercodec.go is the compact form of a stored response's header fields that the shared
// Stores write: bytes rather than JSON, because a field value may hold bytes that are not
// UTF-8 (RFC 9110's obs-text), which JSON, PostgreSQL's text or a Lua string round trip
// would alter, and a replay is byte for byte.

package server

import (
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
)

// ErrCorruptHeader is returned by ParseHeader for bytes AppendHeader did not write: damaged,
// or cut short.
var ErrCorruptHeader = errors.New("server: stored header fields are damaged")

// AppendHeader appends h to b as the count of its (name, value) pairs, then the pairs,
// each string a uvarint length then its bytes; a name with several values appears once per
// value, in order. Names are sorted, so one header always encodes to the same bytes. For
// Store implementations; ParseHeader reads it back.
func AppendHeader(b []byte, h http.Header) []byte {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	b = binary.AppendUvarint(b, uint64(n))
	// The names are sorted in a buffer on the stack for the usual few.
	var buf [16]string
	keys := buf[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// ParseHeader reads what AppendHeader wrote: nil for no fields (a name without values does
// not survive the trip), and for empty b. It returns an error matching ErrCorruptHeader, never
// panics, for anything else, a cut-short encoding included.
func ParseHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	pairs, w := binary.Uvarint(b)
	if w <= 0 || pairs > uint64(len(b)) { // each pair takes at least two bytes
		return nil, ErrCorruptHeader
	}
	b = b[w:]
	if pairs == 0 {
		if len(b) > 0 {
			return nil, ErrCorruptHeader
		}
		return nil, nil
	}
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
	for range pairs {
		k, ok := next()
		if !ok {
			return nil, ErrCorruptHeader
		}
		v, ok := next()
		if !ok {
			return nil, ErrCorruptHeader
		}
		h[k] = append(h[k], v)
	}
	if len(b) > 0 {
		return nil, ErrCorruptHeader
	}
	return h, nil
}
