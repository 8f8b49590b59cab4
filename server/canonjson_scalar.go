// canonjson_scalar.go reads JSON strings and numbers for canonjson.go, checking them and
// whether they are canonical already, and writes their canonical form for
// canonjson_write.go.

package server

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

const lowerHex = "0123456789abcdef"

// str reads the string at body[start] and returns the index just past it and whether it
// has an escape. A string is canonical if its only escapes are those appendRune writes.
func (st *canonState) str(start int) (int, bool, error) {
	b, escaped := st.body, false
	for i := start + 1; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c < 0x20:
			return 0, false, st.fail(i, "control character in a string")
		case c != '\\':
			i++
			continue
		}
		n, err := st.escape(i)
		if err != nil {
			return 0, false, err
		}
		escaped = true
		i += n
	}
	return 0, false, st.fail(len(b), "unterminated string")
}

// escape checks the escape at body[i] (a backslash) and returns its length. A \u escape
// of a surrogate must be a high one followed at once by an escaped low one.
func (st *canonState) escape(i int) (int, error) {
	b := st.body
	if i+1 >= len(b) {
		return 0, st.fail(i, "unterminated string")
	}
	switch b[i+1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case '/':
		st.canonical = false
		return 2, nil
	case 'u':
	default:
		return 0, st.fail(i, "invalid escape")
	}
	r, ok := hex4(b, i+2)
	switch {
	case !ok:
		return 0, st.fail(i, `invalid \u escape`)
	case utf16.IsSurrogate(r):
		low, ok := hex4(b, i+8)
		if r >= 0xdc00 || !ok || b[i+6] != '\\' || b[i+7] != 'u' || low < 0xdc00 || low > 0xdfff {
			return 0, fmt.Errorf("%w: a lone UTF-16 surrogate escape at byte %d", errNotJSON, i)
		}
		st.canonical = false
		return 12, nil
	}
	if r >= 0x20 || shortEscape(r) != 0 || b[i+2] != '0' || b[i+3] != '0' ||
		b[i+4] != lowerHex[r>>4] || b[i+5] != lowerHex[r&0xf] {
		st.canonical = false
	}
	return 6, nil
}

// hex4 returns the value of the four hex digits at b[i:], if they are.
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		d := unhex(c)
		if d < 0 {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// shortEscape returns the letter of r's two-character escape (\b \f \n \r \t), or 0.
func shortEscape(r rune) byte {
	switch r {
	case '\b':
		return 'b'
	case '\f':
		return 'f'
	case '\n':
		return 'n'
	case '\r':
		return 'r'
	case '\t':
		return 't'
	}
	return 0
}

// escapeRune decodes the valid escape at b[i] (a backslash, a surrogate pair in one) and
// returns the character and the escape's length.
func escapeRune(b []byte, i int) (rune, int) {
	switch c := b[i+1]; c {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, _ := hex4(b, i+2)
		if utf16.IsSurrogate(r) {
			low, _ := hex4(b, i+8)
			return utf16.DecodeRune(r, low), 12
		}
		return r, 6
	default: // " \ /
		return rune(c), 2
	}
}

// nameRune decodes the character at s[i] of a checked string's contents, escaped or not,
// and returns it and the index just past it.
func nameRune(s []byte, i int) (rune, int) {
	if s[i] == '\\' {
		r, n := escapeRune(s, i)
		return r, i + n
	}
	r, n := utf8.DecodeRune(s[i:])
	return r, i + n
}

// appendString appends the canonical form of the checked string at b[start] to dst and
// returns the index just past the string.
func appendString(dst, b []byte, start int) ([]byte, int) {
	dst = append(dst, '"')
	for i := start + 1; ; {
		run := i
		for b[i] != '"' && b[i] != '\\' {
			i++
		}
		dst = append(dst, b[run:i]...)
		if b[i] == '"' {
			return append(dst, '"'), i + 1
		}
		r, n := escapeRune(b, i)
		dst = appendRune(dst, r)
		i += n
	}
}

// appendRune appends r as RFC 8785 writes it in a string: \" \\ \b \f \n \r \t, other
// control characters as \u00xx, everything else as itself.
func appendRune(dst []byte, r rune) []byte {
	switch {
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case shortEscape(r) != 0:
		return append(dst, '\\', shortEscape(r))
	case r < 0x20:
		return append(dst, '\\', 'u', '0', '0', lowerHex[r>>4], lowerHex[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}

// number reads the number at body[start] (RFC 8259 section 6) and returns the index just
// past it. Its exponent must fit in 32 bits.
func (st *canonState) number(start int) (int, error) {
	b, i := st.body, start
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return 0, st.fail(i, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		if j := skipDigits(b, i+1); j > i+1 {
			i = j
		} else {
			return 0, st.fail(j, "invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := i < len(b) && b[i] == '-'
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, st.fail(j, "invalid number")
		}
		if _, ok := exponent(b[i:j], neg); !ok {
			return 0, fmt.Errorf("%w: number exponent out of range", errNotJSON)
		}
		i = j
	}
	if st.canonical {
		st.scratch = appendNumber(st.scratch[:0], b[start:i])
		st.canonical = bytes.Equal(st.scratch, b[start:i])
	}
	return i, nil
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// exponent returns the value of an exponent's digits, negated if neg, if it fits in an
// int32.
func exponent(digits []byte, neg bool) (int64, bool) {
	digits = bytes.TrimLeft(digits, "0")
	if len(digits) > 10 {
		return 0, false
	}
	var e int64
	for _, c := range digits {
		e = e*10 + int64(c-'0')
	}
	if neg {
		e = -e
	}
	return e, e >= -1<<31 && e < 1<<31
}

// appendNumber appends the canonical spelling of num, a checked JSON number, to dst: its
// exact value with no leading or trailing zeros, written as ECMAScript writes numbers (the
// layout RFC 8785 section 3.2.2.3 adopts): plain digits up to 21 before the point and down
// to 6 zeros after it, d.ddde±x beyond. -0 is 0.
func appendNumber(dst, num []byte) []byte {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	mant, exp := num, int64(0)
	if k := bytes.IndexAny(num, "eE"); k >= 0 {
		e := num[k+1:]
		eneg := e[0] == '-'
		if e[0] == '-' || e[0] == '+' {
			e = e[1:]
		}
		exp, _ = exponent(e, eneg)
		mant = num[:k]
	}
	if dot := bytes.IndexByte(mant, '.'); dot >= 0 {
		exp -= int64(len(mant) - dot - 1)
	}
	first := bytes.IndexAny(mant, "123456789")
	if first < 0 {
		return append(dst, '0')
	}
	last := bytes.LastIndexAny(mant, "123456789")
	for _, c := range mant[last+1:] { // trailing zeros go into the exponent
		if c != '.' {
			exp++
		}
	}
	sig := mant[first : last+1] // the significant digits, and maybe the point
	n := len(sig)
	if bytes.IndexByte(sig, '.') >= 0 {
		n--
	}
	if neg {
		dst = append(dst, '-')
	}
	point := int64(n) + exp // digits before the decimal point
	switch {
	case exp >= 0 && point <= 21:
		dst = appendDigits(dst, sig, -1)
		for range exp {
			dst = append(dst, '0')
		}
		return dst
	case exp < 0 && point > 0 && point <= 21:
		return appendDigits(dst, sig, int(point))
	case exp < 0 && point > -6 && point <= 0:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		return appendDigits(dst, sig, -1)
	}
	dst = appendDigits(dst, sig, 1)
	return strconv.AppendInt(append(dst, 'e'), point-1, 10)
}

// appendDigits appends the digits of sig, leaving out any point in it, with a point
// before the digit of index dot (none if dot is out of range).
func appendDigits(dst, sig []byte, dot int) []byte {
	k := 0
	for _, c := range sig {
		if c == '.' {
			continue
		}
		if k == dot {
			dst = append(dst, '.')
		}
		dst = append(dst, c)
		k++
	}
	return dst
}
