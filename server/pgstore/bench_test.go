// bench_test.go measures the Store's round trips against the real PostgreSQL: a new key's
// life (claim, complete) and a replay (a claim that finds the done record).

package pgstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

func BenchmarkClaimComplete(b *testing.B) {
	pool := testPool(b)
	s := openStore(b, pool, pgstore.Options{Schema: testSchema(b, pool)})
	ctx := context.Background()
	resp := &server.Response{Status: 201, Body: []byte(`{"id":"pay_1","amount":1250}`)}
	i := 0
	for b.Loop() {
		i++
		sc := server.Scope{Identity: "id", Method: "POST", Path: "/payments", Key: strconv.Itoa(i)}
		cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
		if err != nil || !cl.Claimed {
			b.Fatalf("Claim = %+v, %v", cl, err)
		}
		if err := s.Complete(ctx, sc, cl.Token, resp, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimReplay(b *testing.B) {
	pool := testPool(b)
	s := openStore(b, pool, pgstore.Options{Schema: testSchema(b, pool)})
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/payments", Key: "k"}
	cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Complete(ctx, sc, cl.Token, &server.Response{Status: 201, Body: make([]byte, 1024)}, time.Hour); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
		if err != nil || cl.Claimed || cl.Record.Response == nil {
			b.Fatalf("Claim = %+v, %v", cl, err)
		}
	}
}
