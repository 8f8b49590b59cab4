// This file holds the Redis floor's keeper: the claim is one
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

// redisKeeper is safe for concurrent use.
type redisKeeper struct {
	rdb *redis.Client
	ttl time.Duration // of a claim and of a stored answer
}

func newRedisFloor(next http.Handler, rdb *redis.Client, prefix string, ttl time.Duration) *floor {
	return &floor{next: next, k: &redisKeeper{rdb: rdb, ttl: ttl}, prefix: prefix}
}

func (k *redisKeeper) claim(ctx context.Context, key string) (bool, []byte, error) {
	claimed, err := k.rdb.SetNX(ctx, key, "", k.ttl).Result()
	if err != nil || claimed {
		return claimed, nil, err
	}
	stored, err := k.rdb.Get(ctx, key).Bytes()
	switch {
	case errors.Is(err, redis.Nil) || err == nil && len(stored) == 0:
		return false, nil, nil // in progress, or expired since the claim failed
	case err != nil:
		return false, nil, err
	}
	return false, stored, nil
}

func (k *redisKeeper) complete(ctx context.Context, key string, stored []byte) {
	k.rdb.SetXX(context.WithoutCancel(ctx), key, stored, k.ttl)
}
