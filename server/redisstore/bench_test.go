// bench_test.go measures the Store's round trips on the local Redis: a first request's
// claim and completion, and a retry's claim that finds the stored response.

package redisstore_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
)

// BenchmarkClaimComplete is one request's Store traffic: a claim, then the completion
// with a 1 KiB response.
func BenchmarkClaimComplete(b *testing.B) {
	s := newStore(b, newClient(b))
	ctx := context.Background()
	resp := &server.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: make([]byte, 1024)}
	for i := 0; b.Loop(); i++ {
		sc := server.Scope{Identity: "bench", Method: "POST", Path: "/payments", Key: strconv.Itoa(i)}
		cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", 30*time.Second, time.Minute)
		if err != nil || !cl.Claimed {
			b.Fatalf("Claim = %+v, %v", cl, err)
		}
		if err := s.Complete(ctx, sc, cl.Token, resp, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimReplay is a retry's Store traffic: one claim that finds the done record
// and reads its 1 KiB response.
func BenchmarkClaimReplay(b *testing.B) {
	s := newStore(b, newClient(b))
	ctx := context.Background()
	sc := server.Scope{Identity: "bench", Method: "POST", Path: "/payments", Key: "replay"}
	cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", 30*time.Second, time.Minute)
	if err != nil || !cl.Claimed {
		b.Fatalf("Claim = %+v, %v", cl, err)
	}
	resp := &server.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: make([]byte, 1024)}
	if err := s.Complete(ctx, sc, cl.Token, resp, time.Minute); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", 30*time.Second, time.Minute)
		if err != nil || cl.Record.Response == nil || len(cl.Record.Response.Body) != 1024 {
			b.Fatalf("Claim = %+v, %v", cl, err)
		}
	}
}
