// canonjson_test.go: the canonical JSON form, in the package so it can see canonicalJSON.

package server

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"amount":100,"currency":"EUR"}`, `{"amount":100,"currency":"EUR"}`},
		{` { "currency" : "EUR", "amount" : 1e2 } `, `{"amount":100,"currency":"EUR"}`},
		{`{"amount":100.0}`, `{"amount":100}`},
		{`{"amount":1.00E+2}`, `{"amount":100}`},
		{`{"amount":10000e-2}`, `{"amount":100}`},
		{`[0, -0, 0.0, -0e5]`, `[0,0,0,0]`},
		{`[0.5, 5e-1, 50E-2, 0.000001, 1e-7, 12.5e-1, 1.5e21]`, `[0.5,0.5,0.5,0.000001,1e-7,1.25,1.5e21]`},
		{`[-1.25, 1e20, 1e21, 123456789012345678901234567890]`, `[-1.25,100000000000000000000,1e21,1.2345678901234567890123456789e29]`},
		{`[9007199254740993, 9007199254740992]`, `[9007199254740993,9007199254740992]`},
		{`"\u0045\u00e9\t\/\u001f"`, "\"E\u00e9\\t/\\u001f\""},
		{`"\ud83d\ude00"`, "\"\U0001F600\""},
		{`{"b":[true,false,null],"a":{"z":1,"y":2}}`, `{"a":{"y":2,"z":1},"b":[true,false,null]}`},
		// RFC 8785 section 3.2.3 sorts by UTF-16 code units: U+FFFD sorts after U+1F600's
		// surrogates, which UTF-8 byte order would put the other way round.
		{"{\"\uFFFD\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\uFFFD\":1}"},
		{`{}`, `{}`},
		{`[]`, `[]`},
	} {
		got, err := canonicalJSON([]byte(c.in))
		if err != nil {
			t.Errorf("canonicalJSON(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("canonicalJSON(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestCanonicalJSONRefuses(t *testing.T) {
	deep := make([]byte, 0, 2*maxDepth+4)
	for range maxDepth + 2 {
		deep = append(deep, '[')
	}
	for range maxDepth + 2 {
		deep = append(deep, ']')
	}
	for _, in := range []string{
		``, `{`, `{"a":1,}`, `{"a":1,"a":1}`, `{"a":{"b":1,"b":2}}`, `{} {}`, `1 2`, `nul`,
		"\"\xff\"", `"\ud800"`, `"\udc00\ud800"`, `1e99999999999`, `{"a":01}`, `'a'`,
		string(deep),
	} {
		if got, err := canonicalJSON([]byte(in)); !errors.Is(err, errNotJSON) {
			t.Errorf("canonicalJSON(%.40q) = %s, %v; want errNotJSON", in, got, err)
		}
	}
}

// Whatever the input, canonicalJSON returns an error or a fixed point: the canonical form
// of a canonical form is itself.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"amount":100,"currency":"EUR"}`, `[1e2,0.5,-0]`, `"\u00e9"`, `{"a":{"b":[]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		once, err := canonicalJSON(in)
		if err != nil {
			return
		}
		twice, err := canonicalJSON(once)
		if err != nil || string(twice) != string(once) {
			t.Fatalf("canonical form %s is not a fixed point: %s, %v", once, twice, err)
		}
	})
}

func TestCanonicalJSONNestedObjectsAllocateLinearly(t *testing.T) {
	const depth = maxDepth - 1
	const size = 1 << 20
	filler := strings.Repeat("x", size-len(`{"b":0,"a":}`)*depth)
	body := []byte(strings.Repeat(`{"b":0,"a":`, depth/2) + strings.Repeat(`{"a":`, depth-depth/2) +
		`"` + filler + `"` + strings.Repeat("}", depth))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := canonicalJSON(body)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(body) || !strings.HasPrefix(string(out), `{"a":{"a":`) {
		t.Fatalf("wrong canonical form: %d bytes from %d, starting %.20q", len(out), len(body), out)
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(32*len(body)); got > limit {
		t.Fatalf("canonicalising a %d-byte body allocated %d MiB, over %d MiB", len(body), got>>20, limit>>20)
	}
}
