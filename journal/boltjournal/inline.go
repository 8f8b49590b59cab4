// This file holds the bodies stored inside their record's value: a body of
// up to inlineMax bytes follows its record's metadata in the pending bucket
// (record_binary.go, flag 16) instead of going to the bodies bucket. A
// write-ahead then touches one bucket, not two, and its settle deletes one
// value: fewer pages written per commit, and less work in it. Larger bodies,
// and those of journals before version 10, are in the bodies bucket
// (body.go).
//
// The value is the metadata, the body, then the body's length in 4 bytes,
// little-endian: a state change rewrites the metadata and carries the body
// over (keepBody) without reading the record.

package boltjournal

import "encoding/binary"

// inlineMax is the largest body stored inline.
const inlineMax = 2 << 10

// withBody returns a new value: meta (the binary form) marked as holding
// its body, then body and its length.
func withBody(meta, body []byte) []byte {
	v := make([]byte, len(meta), len(meta)+len(body)+4)
	copy(v, meta)
	return appendBody(v, body)
}

// appendBody is withBody on metadata the caller owns, appending in place.
func appendBody(meta, body []byte) []byte {
	meta[1] |= flagInline // flags fit in one byte (flagsKnown)
	meta = append(meta, body...)
	return binary.LittleEndian.AppendUint32(meta, uint32(len(body)))
}

// splitInline cuts a stored value into its metadata and its inline body;
// inline is false for a value whose body, if any, is in the bodies bucket
// (ok then, and meta is v). ok is false for a value that claims an inline
// body it does not hold. body is v's memory.
func splitInline(v []byte) (meta, body []byte, inline, ok bool) {
	if len(v) < 2 || v[0] != binaryTag || v[1]&flagInline == 0 || v[1] >= 0x80 {
		return v, nil, false, true
	}
	if len(v) < 6 { // the tag, the flags and the length at least
		return nil, nil, false, false
	}
	n := binary.LittleEndian.Uint32(v[len(v)-4:])
	if uint64(n) > uint64(len(v)-6) { // compared unconverted: an int may have 32 bits
		return nil, nil, false, false
	}
	end := len(v) - 4
	return v[:end-int(n)], v[end-int(n) : end], true, true
}

// keepBody returns meta, a record's new metadata, carrying over the inline
// body of old, the value it replaces; meta itself if old has none.
func keepBody(meta, old []byte) []byte {
	if _, body, inline, ok := splitInline(old); inline && ok {
		return withBody(meta, body)
	}
	return meta
}

// hasInlineBody reports whether v holds its record's body: the bodies
// bucket then holds nothing of it.
func hasInlineBody(v []byte) bool {
	_, _, inline, ok := splitInline(v)
	return inline && ok
}
