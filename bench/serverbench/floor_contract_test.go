// This file checks that each contract floor is an idempotency layer
// (checkFloor) that also does what the contract adds: a repeat with another
// body is refused 422, the same JSON spaced otherwise is replayed, the key is
// scoped by identity, the whole answer is replayed, the handler's context
// outlives its client but not the lease, and a completion without the
// claim's token changes nothing.

package serverbench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMemContractFloor(t *testing.T) {
	checkContractFloor(t, func(next http.Handler) *contractFloor { return newMemContractFloor(next, time.Minute, time.Hour) })
}

func TestRedisContractFloor(t *testing.T) {
	rdb, prefix := redisPrefix(t)
	checkContractFloor(t, func(next http.Handler) *contractFloor {
		return newRedisContractFloor(next, rdb, prefix, time.Minute, time.Hour)
	})
}

func TestPGContractFloor(t *testing.T) {
	pool, schema := pgSchema(t)
	if err := createPGContractFloor(context.Background(), pool, schema); err != nil {
		t.Fatal(err)
	}
	checkContractFloor(t, func(next http.Handler) *contractFloor {
		return newPGContractFloor(next, pool, schema, time.Minute, time.Hour)
	})
}

// checkContractFloor checks the contract floor newFloor makes.
func checkContractFloor(t *testing.T, newFloor func(http.Handler) *contractFloor) {
	checkFloor(t, func(next http.Handler) http.Handler { return newFloor(next) })

	var deadline time.Time
	var cancelled bool
	f := newFloor(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, _ = r.Context().Deadline()
		cancelled = r.Context().Err() != nil
		w.Header().Set("Location", "/payments/1")
		w.Header().Add("Vary", "Authorization")
		w.Header().Add("Vary", "Accept")
		bare{}.ServeHTTP(w, r)
	}))
	key := "k-" + time.Now().Format(time.RFC3339Nano)
	post := func(auth string, body []byte) *httptest.ResponseRecorder {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the client has gone: the handler runs all the same
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/payments", bytes.NewReader(body))
		r.Header.Set(keyHeader, key)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		return w
	}
	before := time.Now()
	first := post("Bearer a", paymentBody)
	if first.Code != http.StatusCreated {
		t.Fatalf("first: %d %q, want 201", first.Code, first.Body)
	}
	if cancelled || deadline.Before(before.Add(time.Minute)) || deadline.After(time.Now().Add(time.Minute)) {
		t.Errorf("the handler's context: cancelled %v, deadline %v, want live until the lease ends", cancelled, deadline)
	}
	again := post("Bearer a", paymentBody)
	if again.Code != http.StatusCreated || again.Body.String() != first.Body.String() || again.Header().Get("Location") != "/payments/1" ||
		len(again.Header().Values("Vary")) != 2 || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("the replay: %d %q %v, want the first answer with every header it had, and Idempotent-Replayed", again.Code, again.Body, again.Header())
	}
	respaced := append([]byte(" "), paymentBody...)
	if w := post("Bearer a", respaced); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same JSON respaced: %d %v, want the replay", w.Code, w.Header())
	}
	other := bytes.Replace(paymentBody, []byte(`"amount":1999`), []byte(`"amount":2999`), 1)
	if w := post("Bearer a", other); w.Code != http.StatusUnprocessableEntity {
		t.Errorf("the key with another body: %d, want 422", w.Code)
	}
	if w := post("Bearer b", other); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("the key from another identity: %d, want a run of its own (201)", w.Code)
	}

	ctx := context.Background()
	scope := f.prefix + scopeKey(httptest.NewRequest(http.MethodPost, "/payments", nil), key+"-fenced")
	if _, claimed, err := f.k.claim(ctx, scope, "fp", "token"); err != nil || !claimed {
		t.Fatalf("claim: %v, %v; want claimed", claimed, err)
	}
	answer := &contractAnswer{status: http.StatusCreated, header: http.Header{"Content-Type": {"text/plain"}}, body: []byte("ok")}
	if err := f.k.complete(ctx, scope, "fp", "another token", answer); err != nil {
		t.Fatal(err)
	}
	if held, claimed, err := f.k.claim(ctx, scope, "fp", "token 2"); err != nil || claimed || held.answer != nil {
		t.Errorf("after a completion without the claim's token: claimed %v, answer %v, %v; want the record still running", claimed, held.answer, err)
	}
	if err := f.k.complete(ctx, scope, "fp", "token", answer); err != nil {
		t.Fatal(err)
	}
	held, _, err := f.k.claim(ctx, scope, "fp", "token 3")
	if err != nil || held.answer == nil || held.answer.status != http.StatusCreated || string(held.answer.body) != "ok" ||
		held.answer.header.Get("Content-Type") != "text/plain" {
		t.Errorf("after the claim's completion: %+v, %v; want its answer", held.answer, err)
	}
}

// A claim with a token that was released (the repeat of a claim whose reply was lost,
// given up meanwhile) is refused: it must not make a record no handler runs. Another
// token claims the key as usual.
func TestPGContractFloorRefusesAReleasedToken(t *testing.T) {
	pool, schema := pgSchema(t)
	ctx := context.Background()
	if err := createPGContractFloor(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	k := newPGContractFloor(nil, pool, schema, time.Minute, time.Hour).k.(*pgContractKeeper)
	if _, claimed, err := k.claim(ctx, "s", "fp", "t1"); err != nil || !claimed {
		t.Fatalf("first claim: claimed %v, %v", claimed, err)
	}
	if err := k.release(ctx, "s", "t1"); err != nil {
		t.Fatal(err)
	}
	if _, claimed, err := k.claim(ctx, "s", "fp", "t1"); err != nil || claimed {
		t.Fatalf("the released token's claim: claimed %v, %v; want refused", claimed, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, pgContractTable}.Sanitize()).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d records, %v; want none", n, err)
	}
	if _, claimed, err := k.claim(ctx, "s", "fp", "t2"); err != nil || !claimed {
		t.Fatalf("another token: claimed %v, %v", claimed, err)
	}
}
