// Package recordjson writes a journal.Record's JSON form (journal.RecordJSON)
// byte for byte as encoding/json writes it, without reflection: into the
// caller's buffer, in about a quarter of encoding/json's time (BenchmarkAppend,
// the whole form). pgjournal writes its record column this way on every
// write-ahead and settle.
package recordjson

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/idem-go/idem/journal"
)

// Form is which JSON form of a record Append writes.
type Form int

const (
	// Whole is journal.RecordJSON, every field: json.Marshal(journal.JSONOf(r)).
	Whole Form = iota
	// Column is Whole less the key, the operation ID, CallerKey, the state and
	// Updated, the fields pgjournal keeps in columns of their own: as
	// encoding/json writes a struct embedding journal.RecordJSON that hides
	// those five names with empty fields under omitempty.
	Column
)

// ErrTime is returned for a time encoding/json refuses to write (as
// time.Time.MarshalJSON does): a year outside [0, 9999] or a zone offset of a
// day or more.
var ErrTime = errors.New("recordjson: time cannot be written as RFC 3339 JSON")

// Append appends r's JSON form f to b and returns the extended buffer, or
// ErrTime, as encoding/json would refuse r.
func Append(b []byte, r *journal.Record, f Form) ([]byte, error) {
	whole := f == Whole
	b = append(b, '{')
	if whole {
		b = appendString(append(b, `"key":`...), r.Key)
		if r.OperationID != "" {
			b = appendString(append(b, `,"op":`...), r.OperationID)
		}
		b = append(b, ',')
	}
	b = appendString(append(b, `"method":`...), r.Method)
	b = appendString(append(b, `,"url":`...), r.URL)
	if r.Host != "" {
		b = appendString(append(b, `,"host":`...), r.Host)
	}
	if len(r.Header) > 0 {
		b = appendHeader(append(b, `,"header":`...), r.Header)
	}
	if len(r.Dropped) > 0 {
		b = appendStrings(append(b, `,"dropped":`...), r.Dropped)
	}
	if len(r.DroppedQuery) > 0 {
		b = appendStrings(append(b, `,"dropped_query":`...), r.DroppedQuery)
	}
	if r.CallerKey && whole {
		b = append(b, `,"caller_key":true`...)
	}
	for _, f := range [...]struct{ name, v string }{
		{`,"identity":`, r.Identity}, {`,"cred":`, r.CredentialTag},
		{`,"content_type":`, r.ContentType}, {`,"content_encoding":`, r.ContentEncoding},
	} {
		if f.v != "" {
			b = appendString(append(b, f.name...), f.v)
		}
	}
	b = appendString(append(b, `,"sha256":`...), r.BodySHA256)
	var err error
	if b, err = appendTime(append(b, `,"created":`...), r.Created); err != nil {
		return nil, err
	}
	if whole {
		b = strconv.AppendUint(append(b, `,"state":`...), uint64(r.State), 10)
	}
	b = strconv.AppendInt(append(b, `,"attempts":`...), int64(r.Attempts), 10)
	if !r.LastAttempt.IsZero() {
		if b, err = appendTime(append(b, `,"last_attempt":`...), r.LastAttempt); err != nil {
			return nil, err
		}
	}
	if !r.NextAttempt.IsZero() {
		if b, err = appendTime(append(b, `,"next_attempt":`...), r.NextAttempt); err != nil {
			return nil, err
		}
	}
	if r.Status != 0 {
		b = strconv.AppendInt(append(b, `,"status":`...), int64(r.Status), 10)
	}
	if r.LastError != "" {
		b = appendString(append(b, `,"last_error":`...), r.LastError)
	}
	if whole {
		if b, err = appendTime(append(b, `,"updated":`...), r.Updated); err != nil {
			return nil, err
		}
	}
	if r.EncryptionKeyID != "" {
		b = appendString(append(b, `,"kid":`...), r.EncryptionKeyID)
	}
	if r.Location != "" {
		b = appendString(append(b, `,"location":`...), r.Location)
	}
	return append(b, '}'), nil
}

// appendHeader writes h as encoding/json writes a map: keys sorted.
func appendHeader(b []byte, h http.Header) []byte {
	var room [16]string
	keys := room[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStrings(append(appendString(b, k), ':'), h[k])
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
		b = appendString(b, v)
	}
	return append(b, ']')
}

// CheckTime returns ErrTime for a time time.Time.MarshalJSON refuses: a
// year outside [0, 9999], a zone offset of a day or more.
func CheckTime(t time.Time) error {
	if y := t.Year(); y < 0 || y > 9999 {
		return ErrTime
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return ErrTime
	}
	return nil
}

// appendTime writes t as time.Time.MarshalJSON does, and refuses what it
// refuses.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	if err := CheckTime(t); err != nil {
		return nil, err
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as encoding/json does (HTML-safe): quotes,
// backslashes and control characters escaped, <, > and & as \u003c and so
// on, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
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
