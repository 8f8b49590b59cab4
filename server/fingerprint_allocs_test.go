// fingerprint_allocs_test.go: DefaultFingerprint's allocations, without -race.

//go:build !race

// The race detector makes sync.Pool drop items at random, and adds allocations of its own:
// these counts hold only without it.

package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

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
