// hot_test.go checks that a completion is a HOT update (no index on a column it changes,
// room on the page for the new version), and reports the WAL a new key's claim and
// completion write, measured per statement with EXPLAIN (ANALYZE, WAL) so that other
// sessions' writes do not count.

package pgstore

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/server"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestCompletionIsHOT claims and completes 2,000 keys, then reads the table's counters:
// at least 90% of its updates must be HOT.
func TestCompletionIsHOT(t *testing.T) {
	ctx := context.Background()
	// One connection, so that its counters can be flushed before they are read.
	pool := pgtest.Connect(t, pgtest.URL()+"&pool_max_conns=1", pgxpool.New, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
	schema := pgtest.Schema(t, "idem_pgstore_", pool.Exec)
	s, err := Open(ctx, pool, &Options{Schema: schema, PruneEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	resp := &server.Response{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}},
		Body: []byte(`{"id":"pay_1","ref":"order-4827","amount":1250,"currency":"EUR","status":"succeeded"}`)}
	const n = 2000
	for i := range n {
		sc := server.Scope{Identity: "id", Method: "POST", Path: "/payments", Key: strconv.Itoa(i)}
		tok := server.NewToken()
		if cl, err := s.Claim(ctx, sc, tok, "fp", time.Minute, time.Hour); err != nil || !cl.Claimed {
			t.Fatalf("Claim = %+v, %v", cl, err)
		}
		if err := s.Complete(ctx, sc, tok, resp, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var upd, hot int64
	if err := pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname = 'server_records'`, schema).Scan(&upd, &hot); err != nil {
		t.Fatal(err)
	}
	t.Logf("updates %d, HOT %d (%.3f)", upd, hot, float64(hot)/float64(max(upd, 1)))
	if upd < n || float64(hot) < 0.9*float64(upd) {
		t.Errorf("%d of %d updates were HOT; want at least 90%%", hot, upd)
	}
	t.Logf("WAL per new key: claim %d bytes, complete %d bytes (the statements, not their commit records)",
		walOf(t, pool, s, false, resp), walOf(t, pool, s, true, resp))
}

// walOf claims 200 fresh keys and returns the mean WAL bytes that EXPLAIN (ANALYZE, WAL)
// reports for the claim statement, or, with complete, for their completion statements.
func walOf(t *testing.T, pool *pgxpool.Pool, s *Store, complete bool, resp *server.Response) int64 {
	t.Helper()
	ctx := context.Background()
	const m = 200
	var sum int64
	for range m {
		id, tok := server.NewToken(), server.NewToken()
		q, args := s.q.claim, []any{id, "fp", micros(time.Minute), micros(time.Hour), tok}
		if complete {
			if _, err := pool.Exec(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
			q, args = s.q.complete, []any{id, tok, micros(time.Hour), int32(resp.Status), server.AppendHeader(nil, resp.Header), resp.Body, ""}
		}
		var plan []byte
		if err := pool.QueryRow(ctx, `EXPLAIN (ANALYZE, WAL, FORMAT JSON) `+q, args...).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		sum += walBytes(t, plan)
	}
	return sum / m
}

// walBytes reads "WAL Bytes" of the plan's top node.
func walBytes(t *testing.T, plan []byte) int64 {
	t.Helper()
	var p []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &p); err != nil || len(p) == 0 {
		t.Fatalf("EXPLAIN output %s: %v", plan, err)
	}
	b, ok := p[0].Plan["WAL Bytes"].(float64)
	if !ok {
		t.Fatalf("no WAL Bytes in %v", p[0].Plan)
	}
	return int64(b)
}
