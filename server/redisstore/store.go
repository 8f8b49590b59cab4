// store.go is the Store: New, its Options, and the five server.Store methods: a fresh
// claim is one SET NX, everything else one call of a Lua script (scripts.go); encode.go
// writes and reads the values.

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/server"
)

// DefaultPrefix starts every key when Options.Prefix is "".
const DefaultPrefix = "idem:"

// Options configures a Store; the zero value (or nil) works. New copies it: a plain
// value, safe to reuse.
type Options struct {
	// Prefix starts every record's key, "<Prefix>{<Scope.ID()>}", so that several
	// services (or tests) can share one Redis. It must not contain '{' or '}'. "" means
	// DefaultPrefix.
	Prefix string
}

// Store is a server.Store on Redis: one string per record, a fresh claim one SET NX and
// each other method one Lua script, every lease and expiry on Redis's clock (see the
// package doc). It is safe for concurrent use by many goroutines, and by many processes
// sharing one Redis.
type Store struct {
	client redis.UniversalClient
	prefix string
}

// Open returns a Store keeping its records through client: a *redis.Client, a
// *redis.ClusterClient, a failover client, or any other redis.UniversalClient the service
// already has, with ContextTimeoutEnabled set in its options, so that the middleware's
// deadline bounds every call. It checks, within ctx, that Redis answers a PING: a Store
// that cannot reach Redis fails every request closed (503), which a service should learn
// when it starts, not from its users. It returns ErrNoClient for a nil client, an error
// wrapping ErrInvalidOptions for a prefix with a brace or a nil ctx, ErrNoContextTimeout for a client
// that would ignore deadlines, or the PING's error; opts may be nil.
func Open(ctx context.Context, client redis.UniversalClient, opts *Options) (*Store, error) {
	if client == nil {
		return nil, ErrNoClient
	}
	if v := reflect.ValueOf(client); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, ErrNoClient // a nil *redis.Client in the interface
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return nil, fmt.Errorf("%w: Prefix %q must not contain '{' or '}'", ErrInvalidOptions, o.Prefix)
	}
	if !contextTimeout(client) {
		return nil, ErrNoContextTimeout
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidOptions)
	}
	s := &Store{client: client, prefix: o.Prefix}
	if err := s.Ping(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Ping checks that Redis answers a PING within ctx: Open's start-up check, and a
// service's readiness probe.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: Redis does not answer PING: %w", err)
	}
	return nil
}

// contextTimeout reports whether client honours a context's deadline on an open
// connection, for the client types whose options say so; any other UniversalClient is
// taken on trust.
func contextTimeout(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// relSuffix follows a record's key to name the set of its released tokens, in the same
// hash slot.
const relSuffix = ":rel"

// Key returns the Redis key of sc's record: "<Prefix>{<sc.ID()>}". Released tokens are
// kept at Key(sc) + ":rel".
func (s *Store) Key(sc server.Scope) string {
	return s.prefix + "{" + sc.ID() + "}"
}

// Claim implements server.Store: one SET NX PX of the record in progress, and only when
// the key is taken, the claim script, which reads what is there (doc.go). Its Redis
// errors, like every method's, are returned wrapped ("redisstore: claim: …"); the fenced
// methods' refusals are server.ErrLeaseLost.
func (s *Store) Claim(ctx context.Context, sc server.Scope, token, fingerprint string, lease, ttl time.Duration) (server.Claim, error) {
	if token == "" {
		return server.Claim{}, errors.New("redisstore: claim: empty token")
	}
	key := s.Key(sc)
	lms, px := ms(lease), max(ms(lease), ms(ttl))
	ok, err := s.client.SetNX(ctx, key, claimValue(fingerprint, token, px-lms), time.Duration(px)*time.Millisecond).Result()
	if err != nil {
		return server.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	if ok {
		return server.Claim{Claimed: true, Token: token}, nil
	}
	reply, err := claimScript.Run(ctx, s.client, []string{key, key + relSuffix}, token, fingerprint, lms, ms(ttl)).Slice()
	if err != nil {
		return server.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	if len(reply) == 1 && reply[0] == int64(1) {
		return server.Claim{Claimed: true, Token: token}, nil
	}
	if len(reply) == 1 && reply[0] == int64(2) {
		return server.Claim{}, server.ErrLeaseLost // a late claim, released already
	}
	rec, err := decodeReply(reply)
	if err != nil {
		return server.Claim{}, err
	}
	return server.Claim{Record: rec}, nil
}

// Renew implements server.Store.
func (s *Store) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	lms := int64(0) // a lease of 0 ends now
	if lease > 0 {
		lms = ms(lease)
	}
	return s.fenced(ctx, "renew", renewScript, sc, token, lms)
}

// Complete implements server.Store: the response becomes the tail of the record's value
// (status, header in the binary form the package doc describes, unreplayable mark, body).
func (s *Store) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	return s.fenced(ctx, "complete", completeScript, sc, token, ms(ttl), doneTail(resp))
}

// Release implements server.Store.
func (s *Store) Release(ctx context.Context, sc server.Scope, token string) error {
	return s.fenced(ctx, "release", releaseScript, sc, token, ms(server.ReleasedTokenTTL))
}

// TakeOver implements server.Store.
func (s *Store) TakeOver(ctx context.Context, sc server.Scope, stale, token string, lease time.Duration) error {
	if token == "" {
		return errors.New("redisstore: take over: empty token")
	}
	return s.fenced(ctx, "take over", takeOverScript, sc, stale, token, ms(lease))
}

// fenced runs script on sc's record with token and args as ARGV, and maps its reply: 1
// done, 0 refused (server.ErrLeaseLost), a Redis error wrapped.
func (s *Store) fenced(ctx context.Context, op string, script *redis.Script, sc server.Scope, token string, args ...any) error {
	if token == "" {
		return server.ErrLeaseLost // no record is ever held under ""
	}
	key := s.Key(sc)
	n, err := script.Run(ctx, s.client, []string{key, key + relSuffix}, append([]any{token}, args...)...).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("redisstore: %s: %w", op, err)
	case n != 1:
		return server.ErrLeaseLost
	}
	return nil
}

var _ server.Store = (*Store)(nil)
