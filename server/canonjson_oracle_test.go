// canonjson_oracle_test.go keeps the canonical-JSON code of before the single-pass scanner
// (canonjson.go), built on encoding/json.Decoder.Token, unchanged but for its names: the
// oracle that FuzzCanonicalJSONMatchesOracle compares the scanner with, and the "before"
// of BenchmarkFingerprint. oracleFingerprint is DefaultFingerprint of that time.

package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// oracleCanonicalJSON returns the canonical form of the one JSON value in body:
//   - object members sorted by their names' UTF-16 code units (RFC 8785 section 3.2.3);
//   - no white space;
//   - strings with the fewest escapes (section 3.2.2.2);
//   - numbers as exact decimals: 100, 1e2, 100.0 and 1.00E+2 are one number. Unlike RFC
//     8785 section 3.2.2.3 the value is not rounded to an IEEE 754 double, so two amounts
//     that differ only past 2^53 keep different fingerprints.
//
// It refuses (errNotJSON) a body that is not UTF-8, has a lone UTF-16 surrogate escape
// (RFC 8259 sections 8.1 and 8.2: encoding/json would turn either into U+FFFD, so two
// different bodies would share a fingerprint), has an object with a duplicate member name
// (RFC 8785 section 3.1 requires I-JSON), or is not exactly one JSON value.
func oracleCanonicalJSON(body []byte) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: not UTF-8", errNotJSON)
	}
	if oracleLoneSurrogate(body) {
		return nil, fmt.Errorf("%w: a lone UTF-16 surrogate escape", errNotJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v oraclePieces
	if err := oracleCanonValue(dec, &v, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the JSON value", errNotJSON)
	}
	var out bytes.Buffer
	out.Grow(len(body))
	v.writeTo(&out)
	return out.Bytes(), nil
}

// oracleMaxDepth bounds nesting, so a body of a million '[' costs no deep recursion.
const oracleMaxDepth = 1000

// oraclePieces is a canonical value under construction: runs of finished bytes, and objects,
// whose members are sorted only once the object ends. Objects larger than oracleFlatMax are
// kept as nodes and written out once at the end, so a large member value is never copied
// into its object's buffer level by level: nested objects cost time and memory linear in
// the body, where copying each level cost a gigabyte for a 1 MiB body.
type oraclePieces []oraclePiece

// oraclePiece is finished bytes (lit) or an object (obj).
type oraclePiece struct {
	lit *bytes.Buffer
	obj *oracleObject
}

type oracleObject struct {
	members []oracleMember
	size    int // about how many bytes it writes
}

// oracleFlatMax is the size up to which an object is written out at once, as bytes, rather than
// kept as a node: small objects (the many {"a":1} of an array) then cost no node, and a
// byte is copied into at most the few small objects around it.
const oracleFlatMax = 256

type oracleMember struct {
	name  string
	units []uint16 // the name in UTF-16, the sort key
	value oraclePieces
}

// buf returns the run of bytes at the end of ps, starting one if needed.
func (ps *oraclePieces) buf() *bytes.Buffer {
	if n := len(*ps); n > 0 && (*ps)[n-1].lit != nil {
		return (*ps)[n-1].lit
	}
	b := new(bytes.Buffer)
	*ps = append(*ps, oraclePiece{lit: b})
	return b
}

// size is about how many bytes ps writes.
func (ps oraclePieces) size() int {
	n := 0
	for _, p := range ps {
		if p.obj == nil {
			n += p.lit.Len()
		} else {
			n += p.obj.size
		}
	}
	return n
}

// writeTo writes the canonical text of ps to out.
func (ps oraclePieces) writeTo(out *bytes.Buffer) {
	for _, p := range ps {
		if p.obj == nil {
			out.Write(p.lit.Bytes())
		} else {
			p.obj.writeTo(out)
		}
	}
}

// writeTo writes the canonical text of o, its members sorted, to out.
func (o *oracleObject) writeTo(out *bytes.Buffer) {
	out.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			out.WriteByte(',')
		}
		oracleWriteString(out, m.name)
		out.WriteByte(':')
		m.value.writeTo(out)
	}
	out.WriteByte('}')
}

// oracleCanonValue appends the next value of dec to out.
func oracleCanonValue(dec *json.Decoder, out *oraclePieces, depth int) error {
	if depth > oracleMaxDepth {
		return fmt.Errorf("%w: nested deeper than %d", errNotJSON, oracleMaxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", errNotJSON, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return oracleCanonArray(dec, out, depth)
		}
		if t == '{' {
			return oracleCanonObject(dec, out, depth)
		}
		return fmt.Errorf("%w: unexpected %q", errNotJSON, t)
	case string:
		oracleWriteString(out.buf(), t)
	case json.Number:
		n, err := oracleCanonNumber(string(t))
		if err != nil {
			return err
		}
		out.buf().WriteString(n)
	case bool:
		out.buf().WriteString(strconv.FormatBool(t))
	case nil:
		out.buf().WriteString("null")
	}
	return nil
}

func oracleCanonArray(dec *json.Decoder, out *oraclePieces, depth int) error {
	out.buf().WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.buf().WriteByte(',')
		}
		if err := oracleCanonValue(dec, out, depth+1); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the ']'
		return fmt.Errorf("%w: %v", errNotJSON, err)
	}
	out.buf().WriteByte(']')
	return nil
}

func oracleCanonObject(dec *json.Decoder, out *oraclePieces, depth int) error {
	o := oracleObject{size: 2}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", errNotJSON, err)
		}
		name, _ := tok.(string) // the decoder allows only a string here
		var v oraclePieces
		if err := oracleCanonValue(dec, &v, depth+1); err != nil {
			return err
		}
		o.members = append(o.members, oracleMember{name, utf16.Encode([]rune(name)), v})
		o.size += len(name) + 4 + v.size()
	}
	if _, err := dec.Token(); err != nil { // the '}'
		return fmt.Errorf("%w: %v", errNotJSON, err)
	}
	ms := o.members
	slices.SortFunc(ms, func(a, b oracleMember) int { return slices.Compare(a.units, b.units) })
	for i := 1; i < len(ms); i++ {
		if ms[i].name == ms[i-1].name {
			return fmt.Errorf("%w: duplicate oracleMember name", errNotJSON)
		}
	}
	if o.size <= oracleFlatMax {
		o.writeTo(out.buf())
	} else {
		node := o
		*out = append(*out, oraclePiece{obj: &node})
	}
	return nil
}

// oracleWriteString writes s as a JSON string with RFC 8785's escapes: \" \\ \b \f \n \r \t, other
// control characters as \u00xx, everything else as itself.
func oracleWriteString(out *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			out.WriteByte('\\')
			out.WriteByte(c)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if c < 0x20 {
				out.WriteString(`\u00`)
				out.WriteByte(hex[c>>4])
				out.WriteByte(hex[c&0xf])
			} else {
				out.WriteByte(c)
			}
		}
	}
	out.WriteByte('"')
}

// oracleCanonNumber returns the canonical spelling of n, a JSON number: its exact value with no
// leading or trailing zeros, written as ECMAScript writes numbers (the layout RFC 8785
// section 3.2.2.3 adopts): plain digits up to 21 before the point and down to 6 zeros
// after it, d.ddde±x beyond. -0 is 0.
func oracleCanonNumber(n string) (string, error) {
	neg := strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mant, exp := n, int64(0)
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		e, err := strconv.ParseInt(strings.TrimPrefix(n[i+1:], "+"), 10, 32)
		if err != nil {
			return "", fmt.Errorf("%w: number exponent out of range", errNotJSON)
		}
		mant, exp = n[:i], e
	}
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		exp -= int64(len(mant) - i - 1)
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	digits = trimmed
	sign := ""
	if neg {
		sign = "-"
	}
	point := int64(len(digits)) + exp // digits before the decimal point
	switch {
	case exp >= 0 && point <= 21:
		return sign + digits + strings.Repeat("0", int(exp)), nil
	case exp < 0 && point > 0 && point <= 21:
		return sign + digits[:point] + "." + digits[point:], nil
	case exp < 0 && point > -6 && point <= 0:
		return sign + "0." + strings.Repeat("0", int(-point)) + digits, nil
	}
	s := sign + digits[:1]
	if len(digits) > 1 {
		s += "." + digits[1:]
	}
	return s + "e" + strconv.FormatInt(point-1, 10), nil
}

// oracleLoneSurrogate reports whether body holds a \u escape of a UTF-16 surrogate that is not a
// high one followed at once by an escaped low one. Outside strings a backslash is not JSON
// at all, so the body is scanned whole.
func oracleLoneSurrogate(body []byte) bool {
	escape := func(i int) (rune, bool) { // the \uXXXX at body[i:], if any
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		if !ok {
			i++ // a one-character escape: \\, \", \n, ...
			continue
		}
		switch {
		case utf16.IsSurrogate(r) && r >= 0xdc00:
			return true // a low one with no high one before it
		case utf16.IsSurrogate(r):
			low, ok := escape(i + 6)
			if !ok || low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 6 // the pair
		}
		i += 5
	}
	return false
}

// oracleFingerprint is DefaultFingerprint as it was, over oracleCanonicalJSON.
func oracleFingerprint(r *http.Request, body []byte) (string, error) {
	kind, canon := "raw", body
	if len(body) > 0 && oracleIsJSON(r.Header.Get("Content-Type")) && notEncoded(r) {
		var err error
		if canon, err = oracleCanonicalJSON(body); err != nil {
			return "", err
		}
		kind = "json"
	}
	h := sha256.New()
	for _, f := range []string{"idem-fingerprint-v1", r.Method, canonicalPath(r.URL.EscapedPath()), kind} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// oracleIsJSON is isJSON as it was, always through mime.ParseMediaType.
func oracleIsJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
