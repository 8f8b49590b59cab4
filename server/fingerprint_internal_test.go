// fingerprint_internal_test.go: isJSON's shortcut for the usual Content-Types reads them as
// mime.ParseMediaType does; hostile nesting is refused without deep recursion.

package server

import (
	"errors"
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
