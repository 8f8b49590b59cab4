// This file writes a Record's metadata in the JSON form journals before
// version 10 were written in (record_binary.go writes the form of today),
// without reflection, byte for byte as encoding/json writes Record's struct
// tags (record_json_test.go holds the two side by side): the records of
// older journals, which record_parse.go still reads.

package boltjournal

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendJSON appends r as json.Marshal(r) would, followed by box as the
// field "sealed" (storedRecord) when box is not nil.
func appendJSON(r *Record, b, box []byte) ([]byte, error) {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, r.Key)
	if r.OperationID != "" {
		b = append(b, `,"op":`...)
		b = appendJSONString(b, r.OperationID)
	}
	b = append(b, `,"method":`...)
	b = appendJSONString(b, r.Method)
	b = append(b, `,"url":`...)
	b = appendJSONString(b, r.URL)
	if r.Host != "" {
		b = append(b, `,"host":`...)
		b = appendJSONString(b, r.Host)
	}
	if len(r.Header) > 0 {
		b = append(b, `,"header":`...)
		b = appendHeader(b, r.Header)
	}
	if len(r.Dropped) > 0 {
		b = append(b, `,"dropped":`...)
		b = appendStrings(b, r.Dropped)
	}
	if len(r.DroppedQuery) > 0 {
		b = append(b, `,"dropped_query":`...)
		b = appendStrings(b, r.DroppedQuery)
	}
	if r.CallerKey {
		b = append(b, `,"caller_key":true`...)
	}
	if r.Identity != "" {
		b = append(b, `,"identity":`...)
		b = appendJSONString(b, r.Identity)
	}
	if r.CredentialTag != "" {
		b = append(b, `,"cred":`...)
		b = appendJSONString(b, r.CredentialTag)
	}
	if r.ContentType != "" {
		b = append(b, `,"content_type":`...)
		b = appendJSONString(b, r.ContentType)
	}
	if r.ContentEncoding != "" {
		b = append(b, `,"content_encoding":`...)
		b = appendJSONString(b, r.ContentEncoding)
	}
	b = append(b, `,"sha256":`...)
	b = appendJSONString(b, r.BodySHA256)
	var err error
	b = append(b, `,"created":`...)
	if b, err = appendJSONTime(b, r.Created); err != nil {
		return nil, err
	}
	b = append(b, `,"state":`...)
	b = strconv.AppendUint(b, uint64(r.State), 10)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	if !r.LastAttempt.IsZero() {
		b = append(b, `,"last_attempt":`...)
		if b, err = appendJSONTime(b, r.LastAttempt); err != nil {
			return nil, err
		}
	}
	if !r.NextAttempt.IsZero() {
		b = append(b, `,"next_attempt":`...)
		if b, err = appendJSONTime(b, r.NextAttempt); err != nil {
			return nil, err
		}
	}
	if r.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(r.Status), 10)
	}
	if r.LastError != "" {
		b = append(b, `,"last_error":`...)
		b = appendJSONString(b, r.LastError)
	}
	b = append(b, `,"updated":`...)
	if b, err = appendJSONTime(b, r.Updated); err != nil {
		return nil, err
	}
	if r.EncryptionKeyID != "" {
		b = append(b, `,"kid":`...)
		b = appendJSONString(b, r.EncryptionKeyID)
	}
	if r.Location != "" {
		b = append(b, `,"location":`...)
		b = appendJSONString(b, r.Location)
	}
	if len(box) > 0 {
		b = append(b, `,"sealed":"`...)
		b = base64.StdEncoding.AppendEncode(b, box)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

// appendHeader writes h as encoding/json writes a map: keys sorted.
func appendHeader(b []byte, h http.Header) []byte {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendStrings(b, h[k])
	}
	return append(b, '}')
}

// appendStrings writes a []string; nil is null, as encoding/json writes it.
func appendStrings(b []byte, s []string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, v)
	}
	return append(b, ']')
}

var errJSONTime = errors.New("idem: time cannot be written as RFC 3339 JSON")

// appendJSONTime writes t as time.Time.MarshalJSON does, and refuses what it
// refuses: a year outside [0, 9999], a zone offset of a day or more.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, errJSONTime
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return nil, errJSONTime
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendJSONString writes s as encoding/json does (HTML-safe): quotes,
// backslashes and control characters escaped, <, > and & as \u003c and so
// on, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
