// canonjson_equiv_test.go: the single-pass canonicalizer (canonjson.go) gives the same
// canonical form, and refuses the same bodies, as the encoding/json code it replaced
// (canonjson_oracle_test.go), so no fingerprint a running service stored changes.

package server

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unsafe"
)

// equivSeeds are bodies where the two implementations could part: escapes, surrogates,
// number spellings, nesting, duplicate names after unescaping, UTF-16 key order.
var equivSeeds = []string{
	`{"amount":100,"currency":"EUR"}`, ` { "currency" : "EUR", "amount" : 1e2 } `,
	`[0,-0,0.0,-0e5,-0.0e-0,0e99999999999,1e2147483647,1e2147483648,1e-2147483648,1e-2147483649]`,
	`[1E+2,1e+02,0.10,1.0,1e-7,1e-6,0.000001,0.0000001,123e-2,100e-2,1.5e21,1e20,1e21,15e20]`,
	`[999999999999999999999,1000000000000000000000,12345678901234567890123,-1.25,0.5e1]`,
	`[1e00000000000000000000005,1e-000000000000000000007,2.50E-0003,-9007199254740993]`,
	`[1.,.5,01,-,+1,1e,1e+,1e-,--1,0x1,1.e5,Infinity,NaN,-01,00]`,
	`"\u0045\u00e9\t\/\u001f\u001F\u0008\b\f\n\r\t\"\\\u0022\u005c\u007f\u0000"`,
	`"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800\ud800"`,
	`"\ud800\\udc00"`, `"\ud800x\udc00"`, `"\u12G4"`, `"\x"`, `"\u00"`, `"abc`, "\"a\tb\"",
	"\"\x7f\xc3\xa9\u2028\"", "\"\xff\"", "\"\xed\xa0\x80\"", "\xef\xbb\xbf{}",
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"a\/":1,"a/":2}`,
	`{"é":1,"\u00e9":2}`, `{"b":1,"a":{"d":[],"c":{}},"\u0000":null}`,
	"{\"\uFFFD\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\uFFFD\":1}",
	`{"\ufffd":1,"\ud83d\ude00":2,"\ue000":3,"\ud7ff":4}`, "{\"\ue000\":1,\"\U00010000\":2}",
	`{"ab":1,"a":2,"":3,"abc":4}`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":}`, `{1:2}`,
	`[1,]`, `[,1]`, `[1 2]`, `[}`, `{]`, `{} {}`, `1 2`, `nul`, `truex`, `[truefalse]`, `tru`,
	`true`, `false`, `null`, ` null `, `""`, `"a"x`, `[]`, `{}`, `[[]]`, `{"a":{}}`, ``, ` `,
	"\t\n\r 1 \t\n\r", "\v1", "\f1", `{"b":0,"a":{"b":0,"a":{"b":0,"a":1}}}`,
	`[{"b":1,"a":2},{"d":1,"c":2},[{"z":0,"y":[{"x":1,"w":2}]}]]`,
}

func init() {
	for _, n := range []int{maxDepth, maxDepth + 1, maxDepth + 2} {
		equivSeeds = append(equivSeeds,
			strings.Repeat("[", n)+strings.Repeat("]", n),
			strings.Repeat("[", n)+"1"+strings.Repeat("]", n),
			strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n),
			strings.Repeat(`{"b":0,"a":`, n)+"{}"+strings.Repeat("}", n))
	}
}

// checkMatchesOracle fails t unless st canonicalizes in as the oracle does, and takes a
// body the oracle leaves as it is as it is, without a copy.
func checkMatchesOracle(t *testing.T, st *canonState, in []byte) {
	t.Helper()
	want, werr := oracleCanonicalJSON(in)
	got, gerr := st.canonicalize(in)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("canonicalize(%.200q) = %.200q, %v; the oracle %.200q, %v", in, got, gerr, want, werr)
	}
	if werr != nil {
		if !errors.Is(gerr, errNotJSON) {
			t.Fatalf("canonicalize(%.200q): %v is not errNotJSON", in, gerr)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("canonicalize(%.200q) = %.200q; the oracle %.200q", in, got, want)
	}
	if aliases := unsafe.SliceData(got) == unsafe.SliceData(in); aliases != bytes.Equal(in, want) {
		t.Fatalf("canonicalize(%.200q) took the body as it is: %v; canonical already: %v", in, aliases, !aliases)
	}
}

// The fingerprints too: a canonical body is hashed as it is, any other as before.
func checkFingerprintMatchesOracle(t *testing.T, in []byte) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/payments", nil)
	r.Header.Set("Content-Type", "application/json")
	want, werr := oracleFingerprint(r, in)
	got, gerr := DefaultFingerprint(r, in)
	if got != want || (werr == nil) != (gerr == nil) {
		t.Fatalf("DefaultFingerprint(%.200q) = %s, %v; the oracle %s, %v", in, got, gerr, want, werr)
	}
}

func TestCanonicalJSONMatchesOracleOnSeeds(t *testing.T) {
	var st canonState // reused, as in the pool
	for _, s := range equivSeeds {
		checkMatchesOracle(t, &st, []byte(s))
		checkFingerprintMatchesOracle(t, []byte(s))
	}
}

// FuzzCanonicalJSONMatchesOracle compares the two on arbitrary bytes; one canonState serves
// every input, as one from the pool serves many requests.
func FuzzCanonicalJSONMatchesOracle(f *testing.F) {
	for _, s := range equivSeeds {
		f.Add([]byte(s))
	}
	var st canonState
	f.Fuzz(func(t *testing.T, in []byte) {
		checkMatchesOracle(t, &st, in)
		checkFingerprintMatchesOracle(t, in)
	})
}

// Byte mutations seldom keep a body valid JSON, so random documents, respaced, reordered and
// respelled, cover the paths that write a canonical form.
func TestCanonicalJSONMatchesOracleOnRandomDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 1))
	var st canonState
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		var b bytes.Buffer
		randomValue(rng, &b, 0)
		checkMatchesOracle(t, &st, b.Bytes())
	}
}

// randomValue writes a random JSON value, with or without white space, escapes and number
// spellings that the canonical form changes, and sometimes a duplicate member name.
func randomValue(rng *rand.Rand, b *bytes.Buffer, depth int) {
	space := func() {
		if rng.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t ", "\r\n  "}[rng.IntN(4)])
		}
	}
	space()
	switch k := rng.IntN(10); {
	case k < 2 && depth < 6:
		b.WriteByte('{')
		n := rng.IntN(5)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			randomString(rng, b, 2)
			space()
			b.WriteByte(':')
			randomValue(rng, b, depth+1)
		}
		space()
		b.WriteByte('}')
	case k < 4 && depth < 6:
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			randomValue(rng, b, depth+1)
		}
		space()
		b.WriteByte(']')
	case k < 6:
		randomString(rng, b, 6)
	case k < 9:
		randomNumber(rng, b)
	default:
		b.WriteString([]string{"true", "false", "null"}[rng.IntN(3)])
	}
	space()
}

// randomString writes a string of up to max characters from a small alphabet in which
// several spellings share one character, so names collide and order by UTF-16.
func randomString(rng *rand.Rand, b *bytes.Buffer, max int) {
	alphabet := []string{"a", `\u0061`, "b", "é", `\u00e9`, `\u00E9`, "\uffff", "\ue000", `\uE000`,
		"\U0001F600", `\ud83d\ude00`, "\U00010000", `\n`, `\u000a`, `\u001f`, `\u001F`, `\/`, "/",
		`\"`, `\u0022`, `\\`, "\u007f", `\u0000`, "\u2028", "z", "Z", "0"}
	b.WriteByte('"')
	for range rng.IntN(max + 1) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	b.WriteByte('"')
}

// randomNumber writes a number in any spelling JSON allows.
func randomNumber(rng *rand.Rand, b *bytes.Buffer) {
	if rng.IntN(3) == 0 {
		b.WriteByte('-')
	}
	digits := func(n int) string {
		var s strings.Builder
		for range n {
			s.WriteByte("0001234567899"[rng.IntN(13)])
		}
		return s.String()
	}
	switch rng.IntN(4) {
	case 0:
		b.WriteByte('0')
	default:
		b.WriteString("123456789"[rng.IntN(9):][:1] + digits(rng.IntN(25)))
	}
	if rng.IntN(2) == 0 {
		b.WriteString("." + digits(1+rng.IntN(12)))
	}
	if rng.IntN(2) == 0 {
		fmt.Fprintf(b, "%s%s%s", []string{"e", "E"}[rng.IntN(2)], []string{"", "+", "-"}[rng.IntN(3)],
			[]string{"0", "00", "5", "7", "21", "20", "22", "06", "6", "30", "400"}[rng.IntN(11)])
	}
}
