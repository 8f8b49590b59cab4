// This file reads a Record's metadata in the JSON form of journals before
// version 10, without reflection: Resume reads every pending record, and
// encoding/json's reflection was most of the cost of a read. It takes only
// the exact form idem wrote (its field order, no spaces, only the escapes
// it made: record_jsonform_test.go writes it) and leaves anything else to
// encoding/json; what it does read, it reads as encoding/json would
// (record_parse_test.go holds the two side by side).

package boltjournal

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// unmarshalStored reads a record's stored metadata: the binary form
// (record_binary.go), or JSON, as json.Unmarshal into a storedRecord would.
func unmarshalStored(meta []byte) (storedRecord, error) {
	if len(meta) > 0 && meta[0] == binaryTag {
		return parseBinary(meta)
	}
	if s, ok := parseStored(meta); ok {
		return s, nil
	}
	s := storedRecord{Record: new(Record)}
	err := json.Unmarshal(meta, &s)
	return s, err
}

// parseStored reads meta if it is in the exact JSON form idem wrote; ok is
// false otherwise.
func parseStored(meta []byte) (s storedRecord, ok bool) {
	if !utf8.Valid(meta) { // encoding/json reads invalid UTF-8 as U+FFFD
		return s, false
	}
	p := &parser{b: meta, ok: true}
	r := new(Record)
	p.lit(`{"key":`)
	r.Key = p.str()
	if p.field(`,"op":`) {
		r.OperationID = p.str()
	}
	p.lit(`,"method":`)
	r.Method = p.str()
	p.lit(`,"url":`)
	r.URL = p.str()
	if p.field(`,"host":`) {
		r.Host = p.str()
	}
	if p.field(`,"header":`) {
		r.Header = p.header()
	}
	if p.field(`,"dropped":`) {
		r.Dropped = p.strs()
	}
	if p.field(`,"dropped_query":`) {
		r.DroppedQuery = p.strs()
	}
	r.CallerKey = p.field(`,"caller_key":true`)
	if p.field(`,"identity":`) {
		r.Identity = p.str()
	}
	if p.field(`,"cred":`) {
		r.CredentialTag = p.str()
	}
	if p.field(`,"content_type":`) {
		r.ContentType = p.str()
	}
	if p.field(`,"content_encoding":`) {
		r.ContentEncoding = p.str()
	}
	p.lit(`,"sha256":`)
	r.BodySHA256 = p.str()
	p.lit(`,"created":`)
	r.Created = p.time()
	p.lit(`,"state":`)
	r.State = State(p.uint8())
	p.lit(`,"attempts":`)
	r.Attempts = p.int()
	if p.field(`,"last_attempt":`) {
		r.LastAttempt = p.time()
	}
	if p.field(`,"next_attempt":`) {
		r.NextAttempt = p.time()
	}
	if p.field(`,"status":`) {
		r.Status = p.int()
	}
	if p.field(`,"last_error":`) {
		r.LastError = p.str()
	}
	p.lit(`,"updated":`)
	r.Updated = p.time()
	if p.field(`,"kid":`) {
		r.EncryptionKeyID = p.str()
	}
	if p.field(`,"location":`) {
		r.Location = p.str()
	}
	var box []byte
	if p.field(`,"sealed":`) {
		box = p.base64()
	}
	p.lit(`}`)
	return storedRecord{Record: r, Box: box}, p.ok && p.i == len(p.b)
}

// parser reads b from i on. Once a read fails, ok is false and every later
// read returns a zero value.
type parser struct {
	b  []byte
	i  int
	ok bool
}

func (p *parser) fail() { p.ok = false }

// field consumes s if it comes next.
func (p *parser) field(s string) bool {
	if !p.ok || len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// lit consumes s, which must come next.
func (p *parser) lit(s string) {
	if !p.field(s) {
		p.fail()
	}
}

// quoted returns the bytes between a pair of quotes with no escape inside.
func (p *parser) quoted() []byte {
	if !p.field(`"`) {
		p.fail()
		return nil
	}
	for j := p.i; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			q := p.b[p.i:j]
			p.i = j + 1
			return q
		case c == '\\' || c < 0x20:
			p.fail()
			return nil
		}
	}
	p.fail()
	return nil
}

// str reads a string with the escapes idem's JSON form made. A UTF-16
// surrogate escape, which it never makes, is left to encoding/json.
func (p *parser) str() string {
	if !p.field(`"`) {
		p.fail()
		return ""
	}
	start := p.i
	var out []byte // nil until the first escape
	for p.ok && p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if out != nil {
				return string(append(out, s...))
			}
			return string(s)
		case c < 0x20:
			p.fail()
		case c != '\\':
			p.i++
		default:
			out = append(out, p.b[start:p.i]...)
			out = p.escape(out)
			start = p.i
		}
	}
	p.fail()
	return ""
}

// escape appends the character of the escape at p.i to out.
func (p *parser) escape(out []byte) []byte {
	if len(p.b)-p.i < 2 {
		p.fail()
		return out
	}
	c := p.b[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return append(out, c)
	case 'b':
		return append(out, '\b')
	case 'f':
		return append(out, '\f')
	case 'n':
		return append(out, '\n')
	case 'r':
		return append(out, '\r')
	case 't':
		return append(out, '\t')
	case 'u':
		if len(p.b)-p.i < 4 {
			break
		}
		r, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 16)
		if err != nil || utf8.RuneLen(rune(r)) < 0 { // a surrogate half
			break
		}
		p.i += 4
		return utf8.AppendRune(out, rune(r))
	}
	p.fail()
	return out
}

// strs reads a []string: null is nil, [] is empty, not nil.
func (p *parser) strs() []string {
	if p.field("null") {
		return nil
	}
	p.lit("[")
	s := []string{}
	if p.field("]") {
		return s
	}
	for p.ok {
		s = append(s, p.str())
		if p.field("]") {
			return s
		}
		p.lit(",")
	}
	return nil
}

// header reads an http.Header, keys in any order, a later key winning.
func (p *parser) header() http.Header {
	p.lit("{")
	h := http.Header{}
	if p.field("}") {
		return h
	}
	for p.ok {
		k := p.str()
		p.lit(":")
		h[k] = p.strs()
		if p.field("}") {
			return h
		}
		p.lit(",")
	}
	return nil
}

// time reads a time as time.Time.UnmarshalJSON does.
func (p *parser) time() time.Time {
	start := p.i
	p.quoted()
	var t time.Time
	if p.ok && t.UnmarshalJSON(p.b[start:p.i]) != nil {
		p.fail()
	}
	return t
}

// digits returns an integer's digits as JSON writes them: an optional
// minus, no leading zero, no fraction or exponent.
func (p *parser) digits() string {
	start := p.i
	p.field("-")
	j := p.i
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	switch {
	case j == p.i, p.b[p.i] == '0' && j-p.i > 1:
		p.fail()
	case j < len(p.b) && (p.b[j] == '.' || p.b[j] == 'e' || p.b[j] == 'E'):
		p.fail()
	}
	p.i = j
	return string(p.b[start:j])
}

func (p *parser) int() int {
	s := p.digits()
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	if err != nil {
		p.fail()
	}
	return int(n)
}

func (p *parser) uint8() uint8 {
	s := p.digits()
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		p.fail()
	}
	return uint8(n)
}

// base64 reads a []byte as encoding/json does: standard base64.
func (p *parser) base64() []byte {
	q := p.quoted()
	if !p.ok {
		return nil
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(q)))
	n, err := base64.StdEncoding.Decode(b, q)
	if err != nil {
		p.fail()
	}
	return b[:n]
}
