// legacy.go holds the scripts' branches for records of the previous layout (one hash per
// record, doc.go's "Rolling upgrade"): a script that finds a hash at KEYS[1] runs its
// branch here, so records written by an older version are still claimed, renewed,
// completed, released and taken over as that version would.

package redisstore

// legacyNow reads Redis's clock in milliseconds: the hash layout keeps absolute lease
// ends. Since Redis 5, scripts are replicated by their effects, so a script may read TIME
// and then write.
const legacyNow = `
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local f = redis.call('HMGET', KEYS[1], 'st', 'tok', 'lease')
`

// legacyExtend keeps a hash record from expiring before its lease ends at ends.
const legacyExtend = `
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl >= 0 and pttl < ends - now then redis.call('PEXPIRE', KEYS[1], ends - now) end
`

// legacyClaim: claimScript's branch (ARGV: token, fingerprint, lease ms, ttl ms).
const legacyClaim = `
if legacy then` + legacyNow + `
  if not f[1] then
    if redis.call('HEXISTS', KEYS[1], 'rel:' .. ARGV[1]) == 1 then return {2} end
    local lease, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
    redis.call('HSET', KEYS[1], 'st', 'p', 'fp', ARGV[2], 'tok', ARGV[1], 'lease', now + lease)
    redis.call('PEXPIRE', KEYS[1], math.max(lease, ttl))
    return {1}
  end
  local r = redis.call('HMGET', KEYS[1], 'st', 'fp', 'tok', 'lease', 'status', 'hdr', 'body', 'unrep')
  if r[1] == 'p' and r[3] == ARGV[1] then return {1} end
  local left = 0
  if r[4] then left = tonumber(r[4]) - now end
  return {0, left, redis.call('PTTL', KEYS[1]), r[1], r[2], r[3], r[5], r[6], r[7], r[8]}
end
`

// legacyRenew: renewScript's branch (ARGV: token, lease ms).
const legacyRenew = `
if legacy then` + legacyNow + `
  if f[1] ~= 'p' or f[2] ~= ARGV[1] then return 0 end
  local ends = now + tonumber(ARGV[2])
  redis.call('HSET', KEYS[1], 'lease', ends)` + legacyExtend + `
  return 1
end
`

// legacyComplete: completeScript's branch (ARGV: token, ttl ms, the response's tail as
// encode.go's appendDone writes it).
const legacyComplete = `
if legacy then` + legacyNow + `
  if f[1] == 'd' and f[2] == ARGV[1] then return 1 end
  if f[1] ~= 'p' or f[2] ~= ARGV[1] then return 0 end
  local status, nh, nu, h = string.match(ARGV[3], '^(%d+):(%d+):(%d+):()')
  nh, nu = tonumber(nh), tonumber(nu)
  redis.call('HDEL', KEYS[1], 'lease')
  redis.call('HSET', KEYS[1], 'st', 'd', 'status', status, 'hdr', string.sub(ARGV[3], h, h + nh - 1),
    'unrep', string.sub(ARGV[3], h + nh, h + nh + nu - 1), 'body', string.sub(ARGV[3], h + nh + nu))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
`

// legacyRelease: releaseScript's branch (ARGV: token, released-token ms).
const legacyRelease = `
if legacy then` + legacyNow + `
  if f[1] and (f[1] ~= 'p' or f[2] ~= ARGV[1]) then return 0 end
  if f[1] then
    redis.call('HDEL', KEYS[1], 'st', 'fp', 'tok', 'lease', 'status', 'hdr', 'body', 'unrep')
  end
  redis.call('HSET', KEYS[1], 'rel:' .. ARGV[1], 1)
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  return 1
end
`

// legacyTakeOver: takeOverScript's branch (ARGV: stale token, new token, lease ms).
const legacyTakeOver = `
if legacy then` + legacyNow + `
  if f[1] == 'p' and f[2] == ARGV[2] then return 1 end
  if f[1] ~= 'p' or f[2] ~= ARGV[1] then return 0 end
  if tonumber(f[3]) > now then return 0 end
  local ends = now + tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'tok', ARGV[2], 'lease', ends)` + legacyExtend + `
  return 1
end
`
