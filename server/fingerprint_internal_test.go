// fingerprint_internal_test.go: isJSON's shortcut for the usual Content-Types reads them as
// mime.ParseMediaType does; a fingerprint allocates nothing per token; hostile nesting is
// refused without deep recursion.

package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestIsJSONMatchesParseMediaType(t *testing.T) {
	for _, ct := range []string{
		"application/json", "application/json; charset=utf-8", "application/json;charset=utf-8",
		"Application/JSON", "application/json; charset", "application/json;", "application/json ",
		"application/problem+json", "text/plain", "application/jsonx", "", ";",
	} {
		if got, want := isJSON(ct), oracleIsJSON(ct); got != want {
			t.Errorf("isJSON(%q) = %v, ParseMediaType reads %v", ct, got, want)
		}
	}
}

// A fingerprint allocates its result and nothing per token: a body of 2,000 members out
// of order costs what a small one does.
func TestDefaultFingerprintAllocatesNothingPerToken(t *testing.T) {
	var big strings.Builder
	big.WriteString("{ ")
	for i := range 2000 {
		fmt.Fprintf(&big, `"k%04d" : [ 1.50, "\u00e9" ], `, 2000-i)
	}
	big.WriteString(`"a": 1e2 }`)
	r := httptest.NewRequest(http.MethodPost, "/payments", nil)
	r.Header.Set("Content-Type", "application/json")
	for _, body := range []string{benchPayment, big.String()} {
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := DefaultFingerprint(r, []byte(body)); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 2 {
			t.Errorf("a %d-byte body: %.1f allocations per fingerprint, want at most 2", len(body), allocs)
		}
	}
}

// Hostile bodies are refused, or hashed, without deep recursion: a million '[' stops at
// maxDepth.
func TestDefaultFingerprintHostileNesting(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/payments", nil)
	r.Header.Set("Content-Type", "application/json")
	for _, open := range []string{"[", `{"a":`, `{"b":0,"a":`} {
		body := []byte(strings.Repeat(open, 1<<20))
		if _, err := DefaultFingerprint(r, body); !errors.Is(err, errNotJSON) {
			t.Errorf("%d × %q: %v, want errNotJSON", 1<<20, open, err)
		}
	}
}
