// legacy_test.go checks the rolling upgrade: records in the previous layout (one hash per
// key, written here as that version wrote them) are read, renewed, taken over, completed
// and released by this one.

package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/server"
)

// legacyRecord writes sc's record in progress under tok as the hash layout did, its lease
// ending at leaseEnd (Redis time) and its key expiring in an hour.
func legacyRecord(t *testing.T, c *redis.Client, key, tok string, leaseEnd time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := c.HSet(ctx, key, "st", "p", "fp", "fp", "tok", tok, "lease", leaseEnd.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	c.PExpire(ctx, key, time.Hour)
}

func TestLegacyHashRecords(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	redisNow, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: t.Name()}
	key := s.Key(sc)
	old := server.NewToken()
	legacyRecord(t, c, key, old, redisNow.Add(time.Minute))

	cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	if err != nil || cl.Claimed || cl.Record.State != server.StateInProgress || cl.Record.Token != old ||
		cl.Record.LeaseLeft <= 50*time.Second || cl.Record.ExpiresIn <= 59*time.Minute {
		t.Fatalf("Claim of a hash record in progress = %+v, %v", cl, err)
	}
	if cl, err := s.Claim(ctx, sc, old, "fp", time.Minute, time.Hour); err != nil || !cl.Claimed {
		t.Fatalf("repeated Claim by the hash record's holder = %+v, %v", cl, err)
	}
	if err := s.Renew(ctx, sc, old, time.Minute); err != nil {
		t.Fatalf("Renew of a hash record: %v", err)
	}
	if err := s.TakeOver(ctx, sc, old, server.NewToken(), time.Minute); !errors.Is(err, server.ErrLeaseLost) {
		t.Fatalf("TakeOver of a running hash lease: %v, want ErrLeaseLost", err)
	}
	if err := s.Renew(ctx, sc, old, 0); err != nil {
		t.Fatalf("Renew(0) of a hash record: %v", err)
	}
	taker := server.NewToken()
	if err := s.TakeOver(ctx, sc, old, taker, time.Minute); err != nil {
		t.Fatalf("TakeOver of a lapsed hash lease: %v", err)
	}
	resp := &server.Response{Status: 201, Header: http.Header{"X-A": {"1"}}, Body: []byte("ok"), Unreplayable: ""}
	if err := s.Complete(ctx, sc, old, resp, time.Hour); !errors.Is(err, server.ErrLeaseLost) {
		t.Fatalf("Complete by the fenced-out holder: %v, want ErrLeaseLost", err)
	}
	if err := s.Complete(ctx, sc, taker, resp, time.Hour); err != nil {
		t.Fatalf("Complete of a hash record: %v", err)
	}
	if err := s.Complete(ctx, sc, taker, resp, time.Hour); err != nil {
		t.Fatalf("repeated Complete of a hash record: %v", err)
	}
	cl, err = s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	if err != nil || cl.Record.State != server.StateDone || cl.Record.Response == nil ||
		cl.Record.Response.Status != 201 || string(cl.Record.Response.Body) != "ok" || cl.Record.Response.Header.Get("X-A") != "1" {
		t.Fatalf("Claim of a completed hash record = %+v, %v", cl, err)
	}
	if typ := c.Type(ctx, key).Val(); typ != "hash" {
		t.Errorf("TYPE after completing a hash record = %q, want it kept a hash", typ)
	}

	// Release of a hash record keeps its token as the hash layout did: a late claim with
	// it is refused, a new one claims.
	sc.Key += "/release"
	key = s.Key(sc)
	legacyRecord(t, c, key, old, redisNow.Add(time.Minute))
	if err := s.Release(ctx, sc, old); err != nil {
		t.Fatalf("Release of a hash record: %v", err)
	}
	if _, err := s.Claim(ctx, sc, old, "fp", time.Minute, time.Hour); !errors.Is(err, server.ErrLeaseLost) {
		t.Fatalf("late Claim with a released token: %v, want ErrLeaseLost", err)
	}
	if cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour); err != nil || !cl.Claimed {
		t.Fatalf("Claim after the release = %+v, %v", cl, err)
	}
}
