// bench_test.go measures the Store's round trips on the local Redis: a first request's
// claim and completion, beside a floor's two SETs, and a retry's claim that finds the
// stored response. Each reports what it cost Redis (redisCPU).

package redisstore_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/server"
)

// BenchmarkClaimComplete is one request's Store traffic: a claim of a fresh key (one SET
// NX), then the completion with a 1 KiB response (one script).
func BenchmarkClaimComplete(b *testing.B) {
	c := newClient(b)
	s := newStore(b, c)
	ctx := context.Background()
	resp := &server.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: make([]byte, 1024)}
	redisCPU(b, c, func() {
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
	})
}

// BenchmarkClaimReplay is a retry's Store traffic: a claim that finds the done record (a
// SET NX that fails, then the claim script) and reads its 1 KiB response.
func BenchmarkClaimReplay(b *testing.B) {
	c := newClient(b)
	s := newStore(b, c)
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
	redisCPU(b, c, func() {
		for b.Loop() {
			cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", 30*time.Second, time.Minute)
			if err != nil || cl.Record.Response == nil || len(cl.Record.Response.Body) != 1024 {
				b.Fatalf("Claim = %+v, %v", cl, err)
			}
		}
	})
}

// BenchmarkFloorSetNXSetXX is the least an atomic claim on Redis does, for comparison in
// the same run: SET NX PX to claim a fresh key, SET XX PX to store the same 1 KiB answer.
func BenchmarkFloorSetNXSetXX(b *testing.B) {
	c := newClient(b)
	prefix := newPrefix(b, c)
	ctx := context.Background()
	body := string(make([]byte, 1024))
	redisCPU(b, c, func() {
		for i := 0; b.Loop(); i++ {
			key := prefix + strconv.Itoa(i)
			ok, err := c.SetNX(ctx, key, "p:"+server.NewToken(), time.Minute).Result()
			if err != nil || !ok {
				b.Fatalf("SET NX = %v, %v", ok, err)
			}
			if err := c.SetXX(ctx, key, body, time.Minute).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// redisCPU runs f, b's loop, and reports what it cost Redis per operation: redis-us/op,
// the time Redis spent in commands (INFO commandstats: EVALSHA and EVAL, whose time
// includes the commands a script calls, and SET, which counts a script's SET a second
// time), and redis-cpu-us/op, the CPU time of the Redis process (INFO cpu: parsing and
// replies too), the figure to compare. Both count every client's traffic: they are exact
// only on a Redis nothing else uses meanwhile.
func redisCPU(b *testing.B, c *redis.Client, f func()) {
	b.Helper()
	cmd0, cpu0 := redisStats(b, c)
	f()
	cmd1, cpu1 := redisStats(b, c)
	b.ReportMetric((cmd1-cmd0)/float64(b.N), "redis-us/op")
	b.ReportMetric((cpu1-cpu0)/float64(b.N), "redis-cpu-us/op")
}

// redisStats returns the microseconds Redis spent in top-level commands so far, and its
// process's CPU time in microseconds.
func redisStats(b *testing.B, c *redis.Client) (cmd, cpu float64) {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		b.Fatalf("INFO: %v", err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_set":
			for field := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(field, "usec="); ok {
					n, _ := strconv.ParseFloat(v, 64)
					cmd += n
				}
			}
		case "used_cpu_sys", "used_cpu_user":
			n, _ := strconv.ParseFloat(rest, 64)
			cpu += n * 1e6
		}
	}
	return cmd, cpu
}
