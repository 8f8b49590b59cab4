// This file holds the Redis contract floor's keeper: the claim is one
// SET key record NX with the TTL, the record holding the fingerprint, the
// claim's token and the lease's end; the completion one script that sets the
// answer only if the record is still the claim's (fencing). A copy that finds
// the key reads it with one GET, as the Redis floor's does.

package serverbench

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/redis/go-redis/v9"
)

// redisContractKeeper is safe for concurrent use. A record's value is
// 'r' fp 0 token 0 lease-end-in-ms while its handler runs, then
// 'd' fp 0 answer (contractAnswer.encode).
type redisContractKeeper struct {
	rdb        *redis.Client
	lease, ttl time.Duration
}

// completeScript sets KEYS[1] to ARGV[2] for ARGV[3] ms if it is still the
// running record of the claim whose token, between two zero bytes, is
// ARGV[1] (a fingerprint is hex, a token unique).
var completeScript = redis.NewScript(`local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'r' and string.find(v, ARGV[1], 1, true) then
	return redis.call('SET', KEYS[1], ARGV[2], 'XX', 'PX', ARGV[3])
end
return false`)

func newRedisContractFloor(next http.Handler, rdb *redis.Client, prefix string, lease, ttl time.Duration) *contractFloor {
	return &contractFloor{next: next, lease: lease, prefix: prefix, storeTimeout: server.DefaultStoreTimeout, k: &redisContractKeeper{rdb: rdb, lease: lease, ttl: ttl}}
}

// running is the value of scope's record claimed by token at now.
func (k *redisContractKeeper) running(fp, token string, now time.Time) string {
	return "r" + fp + "\x00" + token + "\x00" + strconv.FormatInt(now.Add(k.lease).UnixMilli(), 10)
}

func (k *redisContractKeeper) claim(ctx context.Context, scope, fp, token string) (contractRecord, bool, error) {
	claimed, err := k.rdb.SetNX(ctx, scope, k.running(fp, token, time.Now()), k.ttl).Result()
	if err != nil || claimed {
		return contractRecord{}, claimed, err
	}
	v, err := k.rdb.Get(ctx, scope).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return contractRecord{fingerprint: fp}, false, nil // expired since the claim failed: in progress, as the floor
	case err != nil:
		return contractRecord{}, false, err
	}
	if len(v) == 0 || v[0] != 'r' && v[0] != 'd' {
		return contractRecord{}, false, errContractRecord
	}
	fpGot, rest, ok := bytes.Cut(v[1:], []byte{0})
	if !ok {
		return contractRecord{}, false, errContractRecord
	}
	rec := contractRecord{fingerprint: string(fpGot)}
	if v[0] == 'd' {
		rec.answer, err = decodeAnswer(rest)
	}
	return rec, false, err
}

func (k *redisContractKeeper) complete(ctx context.Context, scope, fp, token string, a *contractAnswer) error {
	done := a.encode(append(append([]byte{'d'}, fp...), 0))
	err := completeScript.Run(ctx, k.rdb, []string{scope}, "\x00"+token+"\x00", done, k.ttl.Milliseconds()).Err()
	if errors.Is(err, redis.Nil) {
		return nil // taken over, or completed: nothing changed
	}
	return err
}
