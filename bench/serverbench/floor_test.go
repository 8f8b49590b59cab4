// This file checks that each floor middleware is an idempotency layer: the
// handler runs once per key, a repeated key gets the stored answer byte for
// byte, a copy arriving while the handler runs gets 409, and a request
// without a key passes through.

package serverbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

func TestMemFloor(t *testing.T) {
	checkFloor(t, func(next http.Handler) http.Handler { return newMemFloor(next) })
}

func TestRedisFloor(t *testing.T) {
	rdb, prefix := redisPrefix(t)
	checkFloor(t, func(next http.Handler) http.Handler { return newRedisFloor(next, rdb, prefix, time.Minute) })
}

func TestPGFloor(t *testing.T) {
	pool, schema := pgSchema(t)
	if err := createPGFloor(context.Background(), pool, schema); err != nil {
		t.Fatal(err)
	}
	checkFloor(t, func(next http.Handler) http.Handler { return newPGFloor(next, pool, schema, time.Minute) })
}

// redisPrefix returns a client of the test Redis and a key prefix of t's
// own, whose keys are deleted when t ends.
func redisPrefix(t *testing.T) (*redis.Client, string) {
	rdb := redisClient(t)
	prefix := "idem-serverbench-test:" + rand.Text() + ":"
	t.Cleanup(func() {
		if err := deleteKeys(context.Background(), rdb, prefix); err != nil {
			t.Error(err)
		}
	})
	return rdb, prefix
}

// pgSchema returns a pool on the test PostgreSQL and a schema of t's own,
// dropped when t ends.
func pgSchema(t *testing.T) (*pgxpool.Pool, string) {
	url := pgtest.URL()
	pgConn(t, url) // skips without a server
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	schema := "idem_serverbench_test_" + strings.ToLower(rand.Text()[:10])
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Error(err)
		}
		pool.Close()
	})
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return pool, schema
}

// checkFloor wraps the bare handler (behind a gate that can hold it) with
// floor and checks its behaviour.
func checkFloor(t *testing.T, floor func(http.Handler) http.Handler) {
	t.Helper()
	var runs atomic.Int64
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var hold atomic.Bool
	h := floor(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if hold.Load() {
			entered <- struct{}{}
			<-release
		}
		bare{}.ServeHTTP(w, r)
	}))
	post := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/payments", bytes.NewReader(paymentBody))
		if key != "" {
			r.Header.Set(keyHeader, key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	key := rand.Text()
	first := post(key)
	again := post(key)
	switch {
	case first.Code != http.StatusCreated || !strings.HasPrefix(first.Body.String(), `{"id":"pay_`):
		t.Fatalf("first answer %d %q, want 201 and a payment", first.Code, first.Body)
	case again.Code != first.Code || again.Body.String() != first.Body.String():
		t.Errorf("repeated key answered %d %q, want the stored %d %q", again.Code, again.Body, first.Code, first.Body)
	case again.Header().Get("Content-Type") != "application/json" || again.Header().Get("Idempotent-Replayed") != "true":
		t.Errorf("replay's header %v, want the stored Content-Type and Idempotent-Replayed", again.Header())
	case runs.Load() != 1:
		t.Errorf("the handler ran %d times for one key, want 1", runs.Load())
	}

	if w := post(""); w.Code != http.StatusCreated || runs.Load() != 2 {
		t.Errorf("without a key: %d, handler runs %d, want 201 and a run", w.Code, runs.Load())
	}

	hold.Store(true)
	held := rand.Text()
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(held) }()
	<-entered
	hold.Store(false)
	if w := post(held); w.Code != http.StatusConflict {
		t.Errorf("a copy while the handler runs got %d, want 409", w.Code)
	}
	close(release)
	if w := <-done; w.Code != http.StatusCreated {
		t.Errorf("the held request got %d, want 201", w.Code)
	}
	if runs.Load() != 3 {
		t.Errorf("the handler ran %d times, want 3", runs.Load())
	}
}
