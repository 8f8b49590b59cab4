// scripts.go holds the Lua scripts behind every Store method but a fresh claim (store.go's
// one SET NX): each touches only the record's key and its released tokens' key, which
// share one hash tag, so each runs atomically on one cluster slot. doc.go states their
// contract; encode.go writes and reads the values they parse.

package redisstore

import "github.com/redis/go-redis/v9"

// load is the prelude of every script: it reads the record at KEYS[1] into st ("p" in
// progress, "d" done, "r" a released key's marker, nil when there is none), fp, tok, and
// rest (where the value's tail starts: the lease's offset or the stored response). A hash
// (the previous layout) sets legacy instead, for legacy.go's branches.
const load = `
local v = redis.pcall('GET', KEYS[1])
local legacy = type(v) == 'table' and v.err ~= nil
local st, fp, tok, rest
if legacy then
elseif v == 'r' then
  st = 'r'
elseif v then
  local nfp, ntok, h
  st, nfp, ntok, h = string.match(v, '^([pd]):(%d+):(%d+):()')
  if not st then return redis.error_reply('redisstore: corrupt record') end
  nfp, ntok = tonumber(nfp), tonumber(ntok)
  fp = string.sub(v, h, h + nfp - 1)
  tok = string.sub(v, h + nfp, h + nfp + ntok - 1)
  rest = h + nfp + ntok
end
`

// claimScript runs when SET NX found the key taken (or it expired since). Where there is
// no record, or only the released key's marker, it creates the record unless the token
// was released (KEYS[2] holds it); a record in progress under the caller's token is a
// repeated claim, which counts as claimed; any other record is returned as it is.
//
//	ARGV: token, fingerprint, lease ms, ttl ms
//	returns {1} when it created the record or found it held under the token, {2} when
//	the token was released, {0, PTTL ms, value} for a record, or the legacy branch's
//	{0, lease left ms, PTTL ms, st, fp, tok, status, hdr, body, unrep}
var claimScript = redis.NewScript(load + legacyClaim + `
if not st or st == 'r' then
  if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return {2} end
  local lease = tonumber(ARGV[3])
  local px = math.max(lease, tonumber(ARGV[4]), redis.call('PTTL', KEYS[1]))
  redis.call('SET', KEYS[1], 'p:' .. #ARGV[2] .. ':' .. #ARGV[1] .. ':' .. ARGV[2] .. ARGV[1] .. (px - lease), 'PX', px)
  return {1}
end
if st == 'p' and tok == ARGV[1] then return {1} end
return {0, redis.call('PTTL', KEYS[1]), v}
`)

// renewScript sets the holder's lease to end lease ms from now, lapsed or not, keeping the
// record at least that long.
//
//	ARGV: token, lease ms
//	returns 1, or 0 if the token does not hold the record
var renewScript = redis.NewScript(load + legacyRenew + `
if st ~= 'p' or tok ~= ARGV[1] then return 0 end
local lease = tonumber(ARGV[2])
local px = math.max(redis.call('PTTL', KEYS[1]), lease, 1)
redis.call('SET', KEYS[1], string.sub(v, 1, rest - 1) .. (px - lease), 'PX', px)
return 1
`)

// completeScript turns the record done: the value keeps the fingerprint and the token (as
// the completer's: a repeat by it answers 1 and changes nothing), its tail becomes the
// response, and the record expires ttl ms from now.
//
//	ARGV: token, ttl ms, the response's tail (encode.go's appendDone)
//	returns 1, or 0 if the token does not hold the record
var completeScript = redis.NewScript(load + legacyComplete + `
if st == 'd' and tok == ARGV[1] then return 1 end
if st ~= 'p' or tok ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'd' .. string.sub(v, 2, rest - 1) .. ARGV[3], 'PX', ARGV[2])
return 1
`)

// releaseScript deletes the record held under the token; a missing record is released
// already. Either way the token joins the set at KEYS[2] for at least ARGV[2] ms, and
// KEYS[1] holds the marker "r" as long, so that a claim with the token arriving late (a
// repeat delayed in the network) misses SET NX and is refused by claimScript.
//
//	ARGV: token, released-token ms
//	returns 1, or 0 if the record is done or held under another token
var releaseScript = redis.NewScript(load + legacyRelease + `
if (st == 'p' and tok ~= ARGV[1]) or st == 'd' then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
local px = math.max(tonumber(ARGV[2]), redis.call('PTTL', KEYS[2]))
redis.call('PEXPIRE', KEYS[2], px)
redis.call('SET', KEYS[1], 'r', 'PX', px)
return 1
`)

// takeOverScript hands a lapsed lease to a new token. A lease still running (PTTL minus
// the value's offset above 0) is refused, as is any token but the holder's; a record held
// under the new token already is a repeat.
//
//	ARGV: stale token, new token, lease ms
//	returns 1, or 0 if refused
var takeOverScript = redis.NewScript(load + legacyTakeOver + `
if st == 'p' and tok == ARGV[2] then return 1 end
if st ~= 'p' or tok ~= ARGV[1] then return 0 end
local pttl = redis.call('PTTL', KEYS[1])
if pttl - tonumber(string.sub(v, rest)) > 0 then return 0 end
local lease = tonumber(ARGV[3])
local px = math.max(pttl, lease, 1)
redis.call('SET', KEYS[1], 'p:' .. #fp .. ':' .. #ARGV[2] .. ':' .. fp .. ARGV[2] .. (px - lease), 'PX', px)
return 1
`)
