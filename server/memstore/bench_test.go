// bench_test.go measures a claim and its completion with a few or a million live records
// in the Store: the cost must not grow with how many keys it keeps (issue: a busy service
// keeps a day of keys, and each claim must not pay for all of them).

package memstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
)

func BenchmarkClaimComplete(b *testing.B) {
	for _, live := range []int{20_000, 1_000_000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			ctx, s := context.Background(), memstore.New(nil)
			resp := &server.Response{Status: 201, Body: []byte(`{"id":"pay_1"}`)}
			n := 0
			claimComplete := func() {
				n++
				sc := server.Scope{Method: "POST", Path: "/payments", Key: strconv.Itoa(n)}
				if _, err := s.Claim(ctx, sc, "t", "fp", time.Minute, 24*time.Hour); err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(ctx, sc, "t", resp, 24*time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			for range live {
				claimComplete()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				claimComplete()
			}
		})
	}
}
