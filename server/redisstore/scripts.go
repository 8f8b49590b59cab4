// scripts.go holds the Lua scripts behind every Store method: one per method, each
// touching only KEYS[1] (the record's hash), so each runs atomically on the record's one
// cluster slot. doc.go states their contract; store.go calls them.

package redisstore

import "github.com/redis/go-redis/v9"

// now is the prelude of every script: the current time in milliseconds on Redis's own
// clock (TIME), never the caller's. Since Redis 5, scripts are replicated by their
// effects, so a script may read TIME and then write.
const now = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// fields is the prelude of every fenced script (after now): f holds the record's state,
// token and lease end. A missing key reads as all false.
const fields = `
local f = redis.call('HMGET', KEYS[1], 'st', 'tok', 'lease')
`

// held follows fields in the scripts that need the record in progress under ARGV[1]: it
// returns 0 (ErrLeaseLost) unless it is.
const held = fields + `
if f[1] ~= 'p' or f[2] ~= ARGV[1] then return 0 end
`

// extend is the postlude of the scripts that set a lease ending at ends (ms, Redis
// time): the record must not expire before it (store.go's Renew contract).
const extend = `
local pttl = redis.call('PTTL', KEYS[1])
if pttl >= 0 and pttl < ends - now then redis.call('PEXPIRE', KEYS[1], ends - now) end
`

// claimScript creates an in-progress record unless the key exists (an expired key does
// not: Redis forgets it), and otherwise returns the record as it is, unless it finds it in
// progress under the caller's token (a repeated claim), which counts as claimed.
//
// A key holding only released tokens (releaseScript's "rel:<token>" fields) has no
// record: a claim with one of them is refused, any other makes the record there.
//
//	ARGV: fingerprint, token, lease ms, ttl ms
//	returns {1} when it created the record or found it held under the token, {2} when
//	the token was released, else
//	        {0, lease left ms, PTTL ms, st, fp, tok, status, hdr, body, unrep}
//	        (fields the record lacks are nil)
var claimScript = redis.NewScript(now + `
if redis.call('HEXISTS', KEYS[1], 'st') == 0 then
  if redis.call('HEXISTS', KEYS[1], 'rel:' .. ARGV[2]) == 1 then return {2} end
  local lease, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], 'st', 'p', 'fp', ARGV[1], 'tok', ARGV[2], 'lease', now + lease)
  redis.call('PEXPIRE', KEYS[1], math.max(lease, ttl))
  return {1}
end
local f = redis.call('HMGET', KEYS[1], 'st', 'fp', 'tok', 'lease', 'status', 'hdr', 'body', 'unrep')
if f[1] == 'p' and f[3] == ARGV[2] then return {1} end
local left = 0
if f[4] then left = tonumber(f[4]) - now end
return {0, left, redis.call('PTTL', KEYS[1]), f[1], f[2], f[3], f[5], f[6], f[7], f[8]}
`)

// renewScript sets the holder's lease to end lease ms from now, lapsed or not.
//
//	ARGV: token, lease ms
//	returns 1, or 0 if the token does not hold the record
var renewScript = redis.NewScript(now + held + `
local ends = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease', ends)
` + extend + `
return 1
`)

// completeScript turns the record done: the lease goes, the response comes, and the
// record expires ttl ms from now. The fingerprint stays, and so does the token, as the
// completer's: a repeat by it answers 1 and changes nothing.
//
//	ARGV: token, ttl ms, status, hdr, body, unrep
//	returns 1, or 0 if the token does not hold the record
var completeScript = redis.NewScript(now + fields + `
if f[1] == 'd' and f[2] == ARGV[1] then return 1 end
if f[1] ~= 'p' or f[2] ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'lease')
redis.call('HSET', KEYS[1], 'st', 'd', 'status', ARGV[3], 'hdr', ARGV[4], 'body', ARGV[5], 'unrep', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// releaseScript deletes the record's fields. A missing record is released already. Either
// way the token is kept, as a field "rel:<token>" of the key, for at least ARGV[2] ms, so
// that a claim with it arriving late (a repeat delayed in the network) is refused.
//
//	ARGV: token, released-token ms
//	returns 1, or 0 if the record is done or held under another token
var releaseScript = redis.NewScript(now + fields + `
if f[1] and (f[1] ~= 'p' or f[2] ~= ARGV[1]) then return 0 end
if f[1] then
  redis.call('HDEL', KEYS[1], 'st', 'fp', 'tok', 'lease', 'status', 'hdr', 'body', 'unrep')
end
redis.call('HSET', KEYS[1], 'rel:' .. ARGV[1], 1)
local pttl = redis.call('PTTL', KEYS[1])
if pttl < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
`)

// takeOverScript hands a lapsed lease to a new token. A lease still running (its end
// strictly after now) is refused, as is any token but the holder's; a record held under
// the new token already is a repeat.
//
//	ARGV: stale token, new token, lease ms
//	returns 1, or 0 if refused
var takeOverScript = redis.NewScript(now + fields + `
if f[1] == 'p' and f[2] == ARGV[2] then return 1 end
if f[1] ~= 'p' or f[2] ~= ARGV[1] then return 0 end
if tonumber(f[3]) > now then return 0 end
local ends = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'tok', ARGV[2], 'lease', ends)
` + extend + `
return 1
`)
