// This file holds the Redis floor middleware: the claim is one
// SET key "" NX with the TTL, the completion one SET key answer XX with the
// TTL (go-redis sends whole seconds as EX, others as PX); a copy that finds
// the key reads it with one GET.

package serverbench

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisFloor is safe for concurrent use.
type redisFloor struct {
	next   http.Handler
	rdb    *redis.Client
	prefix string        // starts every key
	ttl    time.Duration // of a claim and of a stored answer
}

func newRedisFloor(next http.Handler, rdb *redis.Client, prefix string, ttl time.Duration) *redisFloor {
	return &redisFloor{next: next, rdb: rdb, prefix: prefix, ttl: ttl}
}

func (f *redisFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(keyHeader)
	if key == "" {
		f.next.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	key = f.prefix + key
	claimed, err := f.rdb.SetNX(ctx, key, "", f.ttl).Result()
	if err != nil {
		unavailable(w)
		return
	}
	if !claimed {
		stored, err := f.rdb.Get(ctx, key).Bytes()
		switch {
		case errors.Is(err, redis.Nil) || err == nil && len(stored) == 0:
			conflict(w) // in progress, or expired since the claim failed
		case err != nil:
			unavailable(w)
		default:
			replay(w, stored)
		}
		return
	}
	c := &capture{ResponseWriter: w}
	f.next.ServeHTTP(c, r)
	f.rdb.SetXX(context.WithoutCancel(ctx), key, c.stored(), f.ttl) // stored even if its client left
}
