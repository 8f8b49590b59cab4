// key_internal_test.go: reading the idempotency key, in the package so it can see parseKey.

package server

import (
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
		bad  bool
	}{
		{nil, "", false},
		{[]string{"abc"}, "abc", false},
		{[]string{`"abc"`}, "abc", false},
		{[]string{` "abc" `}, "abc", false},
		{[]string{`"a\"b\\c"`}, `a"b\c`, false},
		{[]string{strings.Repeat("k", MaxKeyLen)}, strings.Repeat("k", MaxKeyLen), false},
		{[]string{`"` + strings.Repeat("k", MaxKeyLen) + `"`}, strings.Repeat("k", MaxKeyLen), false},
		{[]string{strings.Repeat("k", MaxKeyLen+1)}, "", true},
		{[]string{""}, "", true},
		{[]string{`""`}, "", true},
		{[]string{`"abc`}, "", true},
		{[]string{`"a"b"`}, "", true},
		{[]string{`"a\nb"`}, "", true},
		{[]string{`"a\"`}, "", true},
		{[]string{"a b"}, "", true},
		{[]string{`"a b"`}, "", true},
		{[]string{"a\x00b"}, "", true},
		{[]string{"a\x7fb"}, "", true},
		{[]string{"a\tb"}, "", true},
		{[]string{"clé"}, "", true},
		{[]string{"a", "b"}, "", true},
	} {
		got, err := parseKey(c.in)
		if c.bad != (err != nil) || got != c.want {
			t.Errorf("parseKey(%q) = %q, %v; want %q, bad %v", c.in, got, err, c.want, c.bad)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, "", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := parseKey([]string{in})
		if err != nil {
			return
		}
		if key == "" || len(key) > MaxKeyLen {
			t.Fatalf("parseKey(%q) = %q: empty or too long", in, key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] <= ' ' || key[i] > '~' {
				t.Fatalf("parseKey(%q) = %q: byte %#x is not visible ASCII", in, key, key[i])
			}
		}
	})
}
