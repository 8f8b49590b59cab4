// canonjson_write.go writes the canonical form of a body that canonjson.go has read and
// found valid but not canonical: a second pass over its bytes into one reused buffer, each
// byte read once, objects out of order written in the order canonjson.go sorted.

package server

import (
	"cmp"
	"slices"
)

// write appends the canonical form of the checked value at body[i] to st.out and returns
// the index just past the value.
func (st *canonState) write(i int) int {
	b := st.body
	switch b[i] {
	case '{':
		return st.writeObject(i)
	case '[':
		return st.writeArray(i)
	case '"':
		var end int
		st.out, end = appendString(st.out, b, i)
		return end
	case 't':
		st.out = append(st.out, "true"...)
		return i + len("true")
	case 'f':
		st.out = append(st.out, "false"...)
		return i + len("false")
	case 'n':
		st.out = append(st.out, "null"...)
		return i + len("null")
	}
	end := i + 1
	for end < len(b) && isNumberByte(b[end]) {
		end++
	}
	st.out = appendNumber(st.out, b[i:end])
	return end
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

func (st *canonState) writeArray(start int) int {
	b := st.body
	st.out = append(st.out, '[')
	i := skipSpace(b, start+1)
	for b[i] != ']' {
		if b[i] == ',' {
			st.out = append(st.out, ',')
			i = skipSpace(b, i+1)
		}
		i = skipSpace(b, st.write(i))
	}
	st.out = append(st.out, ']')
	return i + 1
}

// writeObject writes the object at body[start]: in the order recorded in st.objs if it
// is there, else as its members come.
func (st *canonState) writeObject(start int) int {
	st.out = append(st.out, '{')
	if k, ok := slices.BinarySearchFunc(st.objs, start, func(o reordered, s int) int { return cmp.Compare(o.start, s) }); ok {
		o := st.objs[k]
		for n, m := range st.sorted[o.first : o.first+o.n] {
			if n > 0 {
				st.out = append(st.out, ',')
			}
			st.out, _ = appendString(st.out, st.body, m.name)
			st.out = append(st.out, ':')
			st.write(m.value)
		}
		st.out = append(st.out, '}')
		return o.end
	}
	b := st.body
	i := skipSpace(b, start+1)
	for b[i] != '}' {
		if b[i] == ',' {
			st.out = append(st.out, ',')
			i = skipSpace(b, i+1)
		}
		var end int
		st.out, end = appendString(st.out, b, i)
		i = skipSpace(b, skipSpace(b, end)+1) // past the ':'
		st.out = append(st.out, ':')
		i = skipSpace(b, st.write(i))
	}
	st.out = append(st.out, '}')
	return i + 1
}
