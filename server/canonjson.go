// canonjson.go re-encodes a JSON text in a canonical form, in the manner of RFC 8785 (JSON
// Canonicalization Scheme), so that key order, white space, string escapes and number
// spelling do not change a fingerprint. fingerprint.go hashes the result. This file reads
// and checks the text in one pass over its bytes; canonjson_scalar.go reads and writes
// strings and numbers; canonjson_write.go writes the canonical form when the text is not.

package server

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
	"unsafe"
)

// errNotJSON wraps every reason canonicalJSON refuses a body.
var errNotJSON = errors.New("server: invalid JSON")

// maxDepth bounds nesting: a value inside more than maxDepth arrays and objects is refused,
// so a body of a million '[' costs no deep recursion.
const maxDepth = 1000

// canonicalJSON returns the canonical form of the one JSON value in body:
//   - object members sorted by their names' UTF-16 code units (RFC 8785 section 3.2.3);
//   - no white space;
//   - strings with the fewest escapes (section 3.2.2.2);
//   - numbers as exact decimals: 100, 1e2, 100.0 and 1.00E+2 are one number. Unlike RFC
//     8785 section 3.2.2.3 the value is not rounded to an IEEE 754 double, so two amounts
//     that differ only past 2^53 keep different fingerprints.
//
// It refuses (errNotJSON) a body that is not UTF-8, has a lone UTF-16 surrogate escape
// (RFC 8259 sections 8.1 and 8.2: decoding either to U+FFFD would give two different
// bodies one fingerprint), has an object with a duplicate member name (RFC 8785 section 3.1
// requires I-JSON), nests deeper than maxDepth, has a number whose exponent does not fit
// in 32 bits, or is not exactly one JSON value. DefaultFingerprint uses canonState, which
// this wraps, to reuse its memory.
func canonicalJSON(body []byte) ([]byte, error) {
	var st canonState
	canon, err := st.canonicalize(body)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(canon), nil
}

// canonState is the working memory of canonicalizing one body, reusable for the next: the
// body is read once, and written out again only if it is not canonical already, so the
// cost per token is a few comparisons, not an allocation.
type canonState struct {
	body      []byte
	canonical bool         // everything read so far is in canonical form
	open      []memberSpan // the members read of each object being read, innermost last
	objs      []reordered  // the objects whose members are out of order
	sorted    []memberSpan // their members, in canonical order
	scratch   []byte       // a number's canonical form, to compare with the body's
	out       []byte       // the canonical form, if the body is not
}

// memberSpan is where an object member is in the body.
type memberSpan struct {
	name, nameEnd int  // the name's opening quote, and just past its closing one
	value         int  // the value's first byte
	escaped       bool // the name has a backslash escape
}

// reordered is an object whose members the canonical form writes in another order.
type reordered struct {
	start, end int // its '{', and just past its '}'
	first, n   int // its members, sorted[first:first+n]
}

// maxKept bounds the bytes each buffer of a canonState keeps for the next body: bodies up
// to about that size reuse their memory, a larger one allocates a few buffers of its size.
const maxKept = 256 << 10

// canonicalize returns the canonical form of body (see canonicalJSON): body itself if it
// is canonical already, else st's buffer, valid until st's next use.
func (st *canonState) canonicalize(body []byte) ([]byte, error) {
	st.reset(body)
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: not UTF-8", errNotJSON)
	}
	end, err := st.value(st.space(0), 0)
	if err != nil {
		return nil, err
	}
	if st.space(end) != len(body) {
		return nil, fmt.Errorf("%w: data after the JSON value", errNotJSON)
	}
	if st.canonical {
		return body, nil
	}
	slices.SortFunc(st.objs, func(a, b reordered) int { return cmp.Compare(a.start, b.start) })
	st.out = slices.Grow(st.out[:0], len(body))
	st.write(skipSpace(body, 0))
	return st.out, nil
}

// reset readies st for body, dropping any buffer a huge body left too large to keep.
func (st *canonState) reset(body []byte) {
	st.body, st.canonical = body, true
	st.open, st.objs, st.sorted = keep(st.open), keep(st.objs), keep(st.sorted)
	st.scratch, st.out = keep(st.scratch), keep(st.out)
}

// keep returns s emptied, or nil if it is too large to keep.
func keep[S ~[]E, E any](s S) S {
	var e E
	if cap(s)*int(unsafe.Sizeof(e)) > maxKept {
		return nil
	}
	return s[:0]
}

// fail is the error for the byte at i, or for a body ending early.
func (st *canonState) fail(i int, what string) error {
	if i >= len(st.body) {
		return fmt.Errorf("%w: %s at the end", errNotJSON, what)
	}
	return fmt.Errorf("%w: %s at byte %d", errNotJSON, what, i)
}

// space returns the index of the first byte at or after i that is not white space. White
// space is never canonical.
func (st *canonState) space(i int) int {
	j := skipSpace(st.body, i)
	if j != i {
		st.canonical = false
	}
	return j
}

// skipSpace returns the index of the first byte at or after i that is not JSON's white
// space (RFC 8259 section 2).
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// value reads the value at body[i], nested in depth arrays and objects, and returns the
// index just past it.
func (st *canonState) value(i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("%w: nested deeper than %d", errNotJSON, maxDepth)
	}
	if i >= len(st.body) {
		return 0, st.fail(i, "no value")
	}
	switch c := st.body[i]; {
	case c == '{':
		return st.object(i, depth)
	case c == '[':
		return st.array(i, depth)
	case c == '"':
		end, _, err := st.str(i)
		return end, err
	case c == '-' || '0' <= c && c <= '9':
		return st.number(i)
	case c == 't':
		return st.literal(i, "true")
	case c == 'f':
		return st.literal(i, "false")
	case c == 'n':
		return st.literal(i, "null")
	}
	return 0, st.fail(i, "unexpected character")
}

func (st *canonState) literal(i int, lit string) (int, error) {
	if len(st.body)-i < len(lit) || string(st.body[i:i+len(lit)]) != lit {
		return 0, st.fail(i, "invalid literal")
	}
	return i + len(lit), nil
}

func (st *canonState) array(start, depth int) (int, error) {
	b := st.body
	i := st.space(start + 1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		end, err := st.value(i, depth+1)
		if err != nil {
			return 0, err
		}
		i = st.space(end)
		switch {
		case i < len(b) && b[i] == ',':
			i = st.space(i + 1)
		case i < len(b) && b[i] == ']':
			return i + 1, nil
		default:
			return 0, st.fail(i, "expected ',' or ']'")
		}
	}
}

// object reads the object at body[start]. Its members go on st.open as they come, each
// name compared with the one before: all in order (the usual case), the object is
// canonical as it stands; else it is sorted once it ends and recorded in st.objs, for
// canonjson_write.go to write its members in that order.
func (st *canonState) object(start, depth int) (int, error) {
	b := st.body
	i := st.space(start + 1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	base, inOrder := len(st.open), true
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, st.fail(i, "expected a member name")
		}
		nameEnd, escaped, err := st.str(i)
		if err != nil {
			return 0, err
		}
		m := memberSpan{name: i, nameEnd: nameEnd, escaped: escaped}
		if i = st.space(nameEnd); i >= len(b) || b[i] != ':' {
			return 0, st.fail(i, "expected ':'")
		}
		m.value = st.space(i + 1)
		end, err := st.value(m.value, depth+1)
		if err != nil {
			return 0, err
		}
		if n := len(st.open); n > base {
			switch st.compareNames(st.open[n-1], m) {
			case 0:
				return 0, fmt.Errorf("%w: duplicate member name", errNotJSON)
			case 1:
				inOrder = false
			}
		}
		st.open = append(st.open, m)
		i = st.space(end)
		switch {
		case i < len(b) && b[i] == ',':
			i = st.space(i + 1)
			continue
		case i < len(b) && b[i] == '}':
		default:
			return 0, st.fail(i, "expected ',' or '}'")
		}
		break
	}
	if !inOrder {
		if err := st.reorder(start, i+1, st.open[base:]); err != nil {
			return 0, err
		}
	}
	st.open = st.open[:base]
	return i + 1, nil
}

// reorder sorts ms, the members of the object body[start:end], and records them.
func (st *canonState) reorder(start, end int, ms []memberSpan) error {
	slices.SortFunc(ms, st.compareNames)
	for k := 1; k < len(ms); k++ {
		if st.compareNames(ms[k-1], ms[k]) == 0 {
			return fmt.Errorf("%w: duplicate member name", errNotJSON)
		}
	}
	st.canonical = false
	st.objs = append(st.objs, reordered{start: start, end: end, first: len(st.sorted), n: len(ms)})
	st.sorted = append(st.sorted, ms...)
	return nil
}

// compareNames orders two member names by their UTF-16 code units, as decoded: -1, 0
// (the same name) or 1.
func (st *canonState) compareNames(a, b memberSpan) int {
	x, y := st.body[a.name+1:a.nameEnd-1], st.body[b.name+1:b.nameEnd-1]
	if !a.escaped && !b.escaped {
		return compareUTF16(x, y)
	}
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		var r, s rune
		r, i = nameRune(x, i)
		s, j = nameRune(y, j)
		if r != s {
			return cmp.Compare(utf16Order(r), utf16Order(s))
		}
	}
	return cmp.Compare(len(x)-i, len(y)-j)
}

// compareUTF16 orders two valid UTF-8 texts by their UTF-16 code units.
func compareUTF16(x, y []byte) int {
	p, n := 0, min(len(x), len(y))
	for p < n && x[p] == y[p] {
		p++
	}
	if p == n {
		return cmp.Compare(len(x), len(y))
	}
	for p > 0 && !utf8.RuneStart(x[p]) { // the equal bytes end inside one character
		p--
	}
	r, _ := utf8.DecodeRune(x[p:])
	s, _ := utf8.DecodeRune(y[p:])
	return cmp.Compare(utf16Order(r), utf16Order(s))
}

// utf16Order maps a character to a number that orders characters as their UTF-16 code
// units do: U+E000-U+FFFF after the characters beyond U+FFFF, whose surrogates start with
// 0xD800-0xDBFF; elsewhere UTF-16 order is code point order.
func utf16Order(r rune) rune {
	if r >= 0xe000 && r <= 0xffff {
		return r + 0x110000
	}
	return r
}
