// This file writes a Record's metadata in the journal's binary form, the
// one every record is written in since journal version 10: less than half
// the bytes of the JSON form older versions wrote (record_parse.go reads
// those), so each commit writes fewer pages, and no text to escape or times
// to format. The form, after its tag byte:
//
//	flags                   uvarint: 1 caller's key; 2, 4, 8 the SHA-256,
//	                        the key (a UUID) and the credential tag as raw
//	                        bytes (32, 16 and 16) rather than strings; 16
//	                        the body inline
//	key                     16 bytes (flag 4), or a string
//	op, method, url, host   strings
//	header                  uvarint count of names, sorted; each a string
//	                        and a list
//	dropped, dropped query  lists
//	identity                string
//	cred                    16 bytes (flag 8), or a string
//	content type, content encoding      strings
//	sha256                  32 bytes (flag 2), or a string
//	created                 time
//	state                   one byte
//	attempts                varint
//	last attempt, next attempt          times
//	status                  varint
//	last error              string
//	updated                 time
//	kid, location           strings
//	sealed                  a string
//	body                    with flag 16 only: inline.go
//
// record_binary_read.go reads it back.
//
// A string is a uvarint length and its bytes; a list a uvarint (count+1,
// 0 for none) and its strings; a time a kind byte (0 zero, 1 UTC, 2 with
// an offset), then varint Unix seconds, uvarint nanoseconds and, for kind
// 2, a varint offset in seconds.

package boltjournal

import (
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/idem-go/idem/internal/recordjson"
)

const hexDigits = "0123456789abcdef"

// binaryTag opens metadata in the binary form; JSON opens with '{'.
const binaryTag = 0x01

const (
	flagCallerKey = 1 << iota
	flagRawSHA    // BodySHA256 as 32 raw bytes
	flagRawKey    // Key, a UUID in its canonical form, as 16 raw bytes
	flagRawCred   // CredentialTag as 16 raw bytes
	flagInline    // the body follows the metadata (inline.go)
	// flagsKnown fit in the one byte after the tag, where withBody sets
	// flagInline.
	flagsKnown = flagCallerKey | flagRawSHA | flagRawKey | flagRawCred | flagInline
)

const (
	timeZero = iota
	timeUTC
	timeOffset
)

// appendBinary appends r's metadata in the binary form, followed by box
// (storedRecord's sealed part) when it is not nil. It refuses a time that
// JSON could not hold either (checkTime), so that both forms keep the same
// records. The flags, one byte (flagsKnown), are filled in once the key,
// the credential tag and the SHA-256 have shown whether their raw form
// fits: each is checked and converted in one pass.
func appendBinary(r *Record, b, box []byte) ([]byte, error) {
	var flags byte
	if r.CallerKey {
		flags |= flagCallerKey
	}
	b = append(b, binaryTag, 0)
	flagsAt := len(b) - 1
	var raw bool
	if b, raw = appendUUID(b, r.Key); raw {
		flags |= flagRawKey
	} else {
		b = appendBinString(b, r.Key)
	}
	for _, s := range []string{r.OperationID, r.Method, r.URL, r.Host} {
		b = appendBinString(b, s)
	}
	b = appendBinHeader(b, r.Header)
	b = appendBinList(b, r.Dropped)
	b = appendBinList(b, r.DroppedQuery)
	b = appendBinString(b, r.Identity)
	if b, raw = appendHexOrString(b, r.CredentialTag, 32); raw {
		flags |= flagRawCred
	}
	b = appendBinString(b, r.ContentType)
	b = appendBinString(b, r.ContentEncoding)
	if b, raw = appendHexOrString(b, r.BodySHA256, 64); raw {
		flags |= flagRawSHA
	}
	b[flagsAt] = flags
	var err error
	if b, err = appendBinTime(b, r.Created); err != nil {
		return nil, err
	}
	b = append(b, byte(r.State))
	b = binary.AppendVarint(b, int64(r.Attempts))
	for _, t := range []time.Time{r.LastAttempt, r.NextAttempt} {
		if b, err = appendBinTime(b, t); err != nil {
			return nil, err
		}
	}
	b = binary.AppendVarint(b, int64(r.Status))
	b = appendBinString(b, r.LastError)
	if b, err = appendBinTime(b, r.Updated); err != nil {
		return nil, err
	}
	b = appendBinString(b, r.EncryptionKeyID)
	b = appendBinString(b, r.Location)
	b = binary.AppendUvarint(b, uint64(len(box)))
	return append(b, box...), nil
}

// hexValue maps a lowercase hex digit to its value, anything else to 0xff:
// hex strings in a record (keys, SHA-256, credential tags) are stored as
// the bytes they spell only in the lowercase form idem writes them in, so
// that they read back the same.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range hexDigits {
		t[c] = byte(i)
	}
	return t
}()

// appendHex appends the bytes s spells, if s is lowercase hex digits of an
// even count; else it appends nothing and ok is false.
func appendHex(b []byte, s string) (_ []byte, ok bool) {
	if len(s)%2 != 0 {
		return b, false
	}
	n := len(b)
	for i := 0; i < len(s); i += 2 {
		hi, lo := hexValue[s[i]], hexValue[s[i+1]]
		if hi|lo > 0xf {
			return b[:n], false
		}
		b = append(b, hi<<4|lo)
	}
	return b, true
}

// appendUUID appends the 16 bytes of s, if s is a UUID in the canonical
// lowercase form idem mints keys in (RFC 9562 section 4); else it appends
// nothing and ok is false.
func appendUUID(b []byte, s string) (_ []byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	n := len(b)
	for _, part := range [...]string{s[:8], s[9:13], s[14:18], s[19:23], s[24:]} {
		if b, ok = appendHex(b, part); !ok {
			return b[:n], false
		}
	}
	return b, true
}

// appendHexOrString appends s as the bytes its hex spells when it is n
// lowercase hex digits (raw: the caller sets the flag that says so), else
// as a string.
func appendHexOrString(b []byte, s string, n int) (_ []byte, raw bool) {
	if len(s) == n {
		if b, raw = appendHex(b, s); raw {
			return b, true
		}
	}
	return appendBinString(b, s), false
}

func appendBinString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBinList writes s; nil and empty differ, as they do in JSON.
func appendBinList(b []byte, s []string) []byte {
	if s == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(s))+1)
	for _, v := range s {
		b = appendBinString(b, v)
	}
	return b
}

// appendBinHeader writes h with its names sorted, so that one record has
// one form; an empty header reads back as nil, as JSON omits it.
func appendBinHeader(b []byte, h http.Header) []byte {
	b = binary.AppendUvarint(b, uint64(len(h)))
	if len(h) == 0 {
		return b
	}
	var one [1]string // most requests keep one header: no slice to sort
	names := one[:0]
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		b = appendBinString(b, k)
		b = appendBinList(b, h[k])
	}
	return b
}

var errRecordTime = errors.New("idem: time outside what a journal record holds (years 0-9999, offsets under a day)")

// checkTime refuses what time.Time.MarshalJSON refuses (recordjson.CheckTime),
// so that every record reads back in the JSON form too.
func checkTime(t time.Time) error {
	if recordjson.CheckTime(t) != nil {
		return errRecordTime
	}
	return nil
}

func appendBinTime(b []byte, t time.Time) ([]byte, error) {
	if t == (time.Time{}) {
		return append(b, timeZero), nil
	}
	if err := checkTime(t); err != nil {
		return nil, err
	}
	_, off := t.Zone()
	if off == 0 {
		b = append(b, timeUTC)
	} else {
		b = append(b, timeOffset)
	}
	b = binary.AppendVarint(b, t.Unix())
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	if off != 0 {
		b = binary.AppendVarint(b, int64(off))
	}
	return b, nil
}
