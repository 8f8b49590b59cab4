// jsontree_test.go is an ordered JSON tree for FuzzCanonicalJSON: it keeps member order,
// duplicate keys and numbers as written, so the fuzz target can write one value in another
// form (reordered, other white space and escapes) or change exactly one live part of it.

package testserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf16"
)

// jnode is one JSON value. kind is one of '{', '[', '"', '0' (a number), 't', 'f', 'n'.
type jnode struct {
	kind  byte
	text  string   // a string's value or a number as written
	keys  []string // an object's member names, in order, duplicates kept
	elems []*jnode // an object's member values or an array's elements
}

// parseTree reads the single JSON value in b.
func parseTree(b []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := readNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data after the value: %v", err)
	}
	return n, nil
}

func readNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &jnode{kind: byte(v)}
		for dec.More() {
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			e, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, e)
		}
		_, err := dec.Token() // the closing delimiter
		return n, err
	case string:
		return &jnode{kind: '"', text: v}, nil
	case json.Number:
		return &jnode{kind: '0', text: string(v)}, nil
	case bool:
		if v {
			return &jnode{kind: 't'}, nil
		}
		return &jnode{kind: 'f'}, nil
	case nil:
		return &jnode{kind: 'n'}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// encode appends n to b. style picks white space (bit 0) and escapes: every non-ASCII rune
// (bit 1) and ASCII letters too (bit 2) as \u escapes. Members are sorted by name, stably so
// that duplicates keep their order, ascending or descending (desc).
func (n *jnode) encode(b []byte, style uint8, desc bool) []byte {
	ws := func(b []byte) []byte {
		if style&1 != 0 {
			return append(b, " \t\r\n"[:1+int(style>>3)%4]...)
		}
		return b
	}
	b = ws(b)
	switch n.kind {
	case '{':
		order := make([]int, len(n.keys))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(i, j int) int {
			if desc {
				return strings.Compare(n.keys[j], n.keys[i])
			}
			return strings.Compare(n.keys[i], n.keys[j])
		})
		b = append(b, '{')
		for i, m := range order {
			if i > 0 {
				b = append(b, ',')
			}
			b = ws(appendString(ws(b), n.keys[m], style))
			b = append(ws(b), ':')
			b = n.elems[m].encode(b, style, desc)
		}
		b = append(ws(b), '}')
	case '[':
		b = append(b, '[')
		for i, e := range n.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.encode(b, style, desc)
		}
		b = append(ws(b), ']')
	case '"':
		b = appendString(b, n.text, style)
	case '0':
		b = append(b, n.text...)
	case 't':
		b = append(b, "true"...)
	case 'f':
		b = append(b, "false"...)
	case 'n':
		b = append(b, "null"...)
	}
	return ws(b)
}

func appendString(b []byte, s string, style uint8) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20, r > 0x7e && style&2 != 0,
			style&4 != 0 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				b = fmt.Appendf(b, `\u%04x\u%04X`, hi, lo)
			} else {
				b = fmt.Appendf(b, `\u%04x`, r)
			}
		default:
			b = append(b, string(r)...)
		}
	}
	return append(b, '"')
}

// mutate returns a copy of n with exactly one live part changed, so the value differs: the
// pick-th (modulo) of its containers, leaves and member names, counting only members no
// later member of the same name overrides. ok is false only if it could not.
func (n *jnode) mutate(pick int) (*jnode, bool) {
	c := n.clone()
	var spots []func()
	c.spots(&spots)
	if len(spots) == 0 {
		return nil, false
	}
	spots[pick%len(spots)]()
	return c, true
}

func (n *jnode) clone() *jnode {
	c := *n
	c.keys = slices.Clone(n.keys)
	c.elems = make([]*jnode, len(n.elems))
	for i, e := range n.elems {
		c.elems[i] = e.clone()
	}
	return &c
}

// spots appends one change per live part of n.
func (n *jnode) spots(out *[]func()) {
	switch n.kind {
	case '{':
		*out = append(*out, func() { // a new member
			n.keys = append(n.keys, unusedKey(n.keys, "new"))
			n.elems = append(n.elems, &jnode{kind: 'n'})
		})
		for i, k := range n.keys {
			if slices.Contains(n.keys[i+1:], k) {
				continue // overridden: changing it changes nothing
			}
			*out = append(*out, func() { n.keys[i] = unusedKey(n.keys, k) })
			n.elems[i].spots(out)
		}
	case '[':
		*out = append(*out, func() { n.elems = append(n.elems, &jnode{kind: 'n'}) })
		for _, e := range n.elems {
			e.spots(out)
		}
	case '"':
		*out = append(*out, func() { n.text += "x" })
	case '0':
		*out = append(*out, func() { // -0.5e3 -> -10.5e3: still a number, another one
			i := 0
			if strings.HasPrefix(n.text, "-") {
				i = 1
			}
			n.text = n.text[:i] + "1" + n.text[i:]
		})
	case 't', 'f', 'n':
		*out = append(*out, func() { n.kind = map[byte]byte{'t': 'f', 'f': 't', 'n': 'f'}[n.kind] })
	}
}

// unusedKey returns base with x appended until no key in keys has that name.
func unusedKey(keys []string, base string) string {
	k := base + "x"
	for slices.Contains(keys, k) {
		k += "x"
	}
	return k
}
