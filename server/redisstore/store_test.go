// store_test.go runs the conformance suite against real Redis, and checks what is the
// Redis Store's own: its key layout, New's errors, and that leases and expiry are Redis's.

package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/redisstore"
	"github.com/idem-go/idem/server/servertest"
)

// The conformance suite, on Redis's own clock: leases of RealLease are waited for for
// real.
func TestConformance(t *testing.T) {
	c := newClient(t)
	servertest.Run(t, servertest.Config{
		Open:      func(t testing.TB) server.Store { return newStore(t, c) },
		RealLease: 500 * time.Millisecond, // room for round trips on a loaded machine
	})
}

// A record is one string at "<prefix>{<Scope.ID()>}" (one hash tag, so one cluster slot),
// with a TTL, and a claim and its completion write nothing else.
func TestKeyLayout(t *testing.T) {
	c := newClient(t)
	prefix := newPrefix(t, c)
	s, err := redisstore.Open(context.Background(), c, &redisstore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: "k"}
	want := prefix + "{" + sc.ID() + "}"
	if got := s.Key(sc); got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
	cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	if err != nil || !cl.Claimed {
		t.Fatalf("Claim = %+v, %v", cl, err)
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != want {
		t.Errorf("keys = %q, want only %q", keys, want)
	}
	if typ := c.Type(ctx, want).Val(); typ != "string" {
		t.Errorf("TYPE = %q, want string", typ)
	}
	if ttl := c.PTTL(ctx, want).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("PTTL = %v, want about the 1 h TTL", ttl)
	}
	if err := s.Complete(ctx, sc, cl.Token, &server.Response{Status: 201, Body: []byte("ok")}, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, want).Val(); ttl <= time.Hour {
		t.Errorf("PTTL after Complete = %v, want about the 2 h TTL", ttl)
	}
	wantValue := "d:2:26:fp" + cl.Token + "201:1:0:\x00ok" // an empty header is one 0 byte
	if v := c.Get(ctx, want).Val(); v != wantValue {
		t.Errorf("done record %q, want %q: the completer's token and the response, no lease", v, wantValue)
	}
}

// Open checks that Redis answers before it returns a Store: a Store pointed at a closed
// port is refused at start-up, not found out by every request answering 503. The
// default prefix is "idem:"; a prefix with a brace, a nil client, and a client that
// ignores context deadlines are refused before anything is sent.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	closed := redis.NewClient(&redis.Options{Addr: closedAddr(t), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer closed.Close()
	if s, err := redisstore.Open(context.Background(), closed, nil); s != nil || err == nil || !strings.Contains(err.Error(), "PING") {
		t.Errorf("Open on a closed port: %v, %v; want the PING's error", s, err)
	}

	c := newClient(t)
	s, err := redisstore.Open(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k := s.Key(server.Scope{}); !strings.HasPrefix(k, "idem:{") {
		t.Errorf("Key with the default prefix = %q", k)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if _, err := redisstore.Open(context.Background(), c, &redisstore.Options{Prefix: "a{b}:"}); !errors.Is(err, redisstore.ErrInvalidOptions) {
		t.Errorf("Open with a braced prefix: %v, want ErrInvalidOptions", err)
	}
	if _, err := redisstore.Open(context.Background(), nil, nil); !errors.Is(err, redisstore.ErrNoClient) {
		t.Errorf("Open(nil): %v, want ErrNoClient", err)
	}
	var none *redis.Client
	if _, err := redisstore.Open(context.Background(), none, nil); !errors.Is(err, redisstore.ErrNoClient) {
		t.Errorf("Open of a nil *redis.Client: %v, want ErrNoClient", err)
	}
	var noCtx context.Context // a caller's nil context is refused, not dereferenced
	if _, err := redisstore.Open(noCtx, c, nil); !errors.Is(err, redisstore.ErrInvalidOptions) {
		t.Errorf("Open with a nil context: %v, want ErrInvalidOptions", err)
	}
	deaf := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer deaf.Close()
	if _, err := redisstore.Open(context.Background(), deaf, nil); !errors.Is(err, redisstore.ErrNoContextTimeout) {
		t.Errorf("Open of a client without ContextTimeoutEnabled: %v, want ErrNoContextTimeout", err)
	}
}

// A lease is judged by Redis's clock: a record whose lease offset says it ended a second
// ago (as a holder whose clock ran fast would never see) is taken over, and one whose
// lease runs far ahead is not, whatever the caller's clock says.
func TestLeaseOnRedisClock(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: t.Name()}
	cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Hour, 2*time.Hour)
	if err != nil || !cl.Claimed {
		t.Fatalf("Claim = %+v, %v", cl, err)
	}
	if err := s.TakeOver(ctx, sc, cl.Token, server.NewToken(), time.Minute); !errors.Is(err, server.ErrLeaseLost) {
		t.Fatalf("TakeOver of an hour's lease: %v, want ErrLeaseLost", err)
	}
	pttl := c.PTTL(ctx, s.Key(sc)).Val().Milliseconds() // the lease ends at PTTL - offset
	lapsed := "p:2:26:fp" + cl.Token + strconv.FormatInt(pttl+1000, 10)
	if err := c.SetArgs(ctx, s.Key(sc), lapsed, redis.SetArgs{KeepTTL: true}).Err(); err != nil {
		t.Fatal(err)
	}
	cl2, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Hour, 2*time.Hour)
	if err != nil || cl2.Claimed || cl2.Record.LeaseLeft > -time.Second+100*time.Millisecond {
		t.Fatalf("Claim after the lease field was set a second back = %+v, %v; want LeaseLeft about -1 s", cl2, err)
	}
	if err := s.TakeOver(ctx, sc, cl.Token, server.NewToken(), time.Minute); err != nil {
		t.Fatalf("TakeOver of a lapsed lease: %v", err)
	}
}

// Any Redis error is returned wrapped, never as ErrLeaseLost: the middleware fails closed.
func TestRedisErrorWrapped(t *testing.T) {
	p := newProxy(t, redisAddr())
	c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	defer c.Close()
	s, err := redisstore.Open(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.down() // Redis goes away after Open's check
	ctx := context.Background()
	sc := server.Scope{Key: "k"}
	_, err = s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	checkRedisErr(t, "Claim", err)
	checkRedisErr(t, "Renew", s.Renew(ctx, sc, "t", time.Minute))
	checkRedisErr(t, "Complete", s.Complete(ctx, sc, "t", &server.Response{Status: 200}, time.Hour))
	checkRedisErr(t, "Release", s.Release(ctx, sc, "t"))
	checkRedisErr(t, "TakeOver", s.TakeOver(ctx, sc, "t", "u", time.Minute))
}

func checkRedisErr(t *testing.T, op string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, server.ErrLeaseLost) || !strings.HasPrefix(err.Error(), "redisstore: ") {
		t.Errorf("%s on a Redis that is not there: %v, want a wrapped connection error", op, err)
	}
}
