// fingerprint_bench_test.go: what DefaultFingerprint costs per request, before (the
// encoding/json oracle) and after the single-pass canonicalizer, in one run.

package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchPayment is a ~200-byte payment as a client may send it: spaced, keys unsorted.
const benchPayment = `{ "currency": "EUR", "amount": 12500, "description": "Invoice 2026-0042",
  "customer": { "name": "Zo\u00eb Martin", "id": "cus_8f2a91" },
  "metadata": { "order": "ord_17", "channel": "web" }, "capture": true }`

func BenchmarkFingerprint(b *testing.B) {
	canon, err := oracleCanonicalJSON([]byte(benchPayment))
	if err != nil {
		b.Fatal(err)
	}
	for _, body := range []struct{ name, ct, body string }{
		{"json", "application/json", benchPayment},
		{"canonical", "application/json", string(canon)},
		{"raw", "application/octet-stream", benchPayment},
	} {
		for _, impl := range []struct {
			name string
			fp   func(*http.Request, []byte) (string, error)
		}{{"before", oracleFingerprint}, {"after", DefaultFingerprint}} {
			b.Run("body="+body.name+"/"+impl.name, func(b *testing.B) {
				r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body.body))
				r.Header.Set("Content-Type", body.ct)
				in := []byte(body.body)
				b.SetBytes(int64(len(in)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := impl.fp(r, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
