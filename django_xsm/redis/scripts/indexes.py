"""Scripts over the per-bucket indexes: due deadlines, listing, pruning, timer failures."""

from __future__ import annotations

from .preludes import PRELUDE_INDEX

__all__ = ["DUE", "LIST_PAGE", "PARK", "PRUNE_EXPIRED", "RECORD_TIMER_FAILURE"]

# The opening of a script over one bucket's indexes: I = KEYS[1..7] (the
# bucket's index keys), type-checked with KEYS[8] (its log index).
_PRELUDE_BUCKET = (
    PRELUDE_INDEX
    + r"""
local I = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]}
local err = bad_type(index_types(I, {KEYS[8], 'zset'}))
if err then return err end
"""
)

# KEYS[1..7] index keys of one bucket, KEYS[8] its log index;
# ARGV[1] until ms, ARGV[2] limit, ARGV[3] snapshot key prefix of the bucket,
# ARGV[4] log key prefix of the bucket, ARGV[5] instance key prefix ('' = all;
# compared literally, glob characters are plain)
# returns {key, due, key, due...} earliest first; keys whose snapshot has
# expired are pruned from every index instead of returned; keys outside the
# key prefix are skipped
DUE = (
    _PRELUDE_BUCKET
    + r"""
local limit = tonumber(ARGV[2])
local want = ARGV[5] or ''
local out, offset = {}, 0
while #out < 2 * limit do
  local rows = redis.call('ZRANGEBYSCORE', I[5], '-inf', ARGV[1], 'WITHSCORES',
    'LIMIT', offset, limit)
  if #rows == 0 then break end
  for i = 1, #rows, 2 do
    if want ~= '' and string.sub(rows[i], 1, #want) ~= want then
      offset = offset + 1
    elseif redis.call('EXISTS', ARGV[3] .. rows[i]) == 1 then
      if #out < 2 * limit then out[#out + 1] = rows[i]; out[#out + 1] = rows[i + 1] end
      offset = offset + 1
    else
      prune(I, rows[i], KEYS[8], ARGV[4])
    end
  end
  if #rows < 2 * limit then break end
end
return out
"""
)

# KEYS[1..7] index keys of one bucket, KEYS[8] its log index;
# ARGV[1] index number to read (2 idx, 3 midx, 4 sidx), ARGV[2] lex min,
# ARGV[3] lex max, ARGV[4] limit, ARGV[5] member prefix length to strip,
# ARGV[6] snapshot key prefix, ARGV[7] log key prefix, ARGV[8] '1' to keep
# only keys of machine ARGV[9] (a state filter combined with a machine filter)
# returns up to limit live keys in lexicographic order (dead ones pruned);
# with a state filter (4), up to limit from sidx then up to limit from midx
# (the caller sorts and merges them): the root state of a machine named like
# it is not in sidx (see reindex), so the machine index answers it, keeping
# the keys whose root state is that state (a layout-1 leftover may come
# from both)
LIST_PAGE = (
    _PRELUDE_BUCKET
    + r"""
local limit = tonumber(ARGV[4])
local strip = tonumber(ARGV[5])
local wanted = string.sub(ARGV[2], 2, 1 + strip - 1)
local function root_is(key)
  local info = redis.call('HGET', I[1], key)
  if not info then return false end
  local parts = split0(info)
  return parts[1] == wanted and parts[2] == wanted
end
local function collect(index, keep)
  local out, min = {}, ARGV[2]
  while #out < limit do
    local rows = redis.call('ZRANGEBYLEX', index, min, ARGV[3], 'LIMIT', 0, limit)
    if #rows == 0 then break end
    for _, m in ipairs(rows) do
      local key = string.sub(m, strip + 1)
      if redis.call('EXISTS', ARGV[6] .. key) == 1 then
        if #out < limit and (ARGV[8] ~= '1' or machine_of(I, key) == ARGV[9])
            and (not keep or keep(key)) then
          out[#out + 1] = key
        end
      else
        prune(I, key, KEYS[8], ARGV[7])
        redis.call('ZREM', index, m)
      end
    end
    if #rows < limit then break end
    min = '(' .. rows[#rows]
  end
  return out
end
local n = tonumber(ARGV[1])
local out = collect(I[n])
if n ~= 4 or strip < 1 then return out end
for _, k in ipairs(collect(I[3], root_is)) do out[#out + 1] = k end
return out
"""
)

# KEYS[1..7] index keys of one bucket, KEYS[8] its log index; ARGV[1] limit,
# ARGV[2] snapshot key prefix, ARGV[3] log key prefix
# prunes keys whose idle expiry passed; a key its index thinks due but
# still alive is scored again by its PTTL, one with no expiry leaves the
# index; returns how many were pruned
PRUNE_EXPIRED = (
    _PRELUDE_BUCKET
    + r"""
local now = now_ms()
local keys = redis.call('ZRANGEBYSCORE', I[7], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local n = 0
for _, key in ipairs(keys) do
  local left = redis.call('PTTL', ARGV[2] .. key)
  if left == -2 then prune(I, key, KEYS[8], ARGV[3]); n = n + 1
  elseif left > 0 then redis.call('ZADD', I[7], now + left, key)  -- due later than scored
  else redis.call('ZREM', I[7], key) end  -- kept for good now
end
return n
"""
)

# KEYS[1] snapshot hash, KEYS[2] due index, KEYS[3] dead index
# ARGV[1] instance key, ARGV[2] expected version, ARGV[3] failures JSON
# ('' = none), ARGV[4] next due ms ('' = none), ARGV[5] any dead 0/1
# returns 1 when recorded, 0 when the version moved on
RECORD_TIMER_FAILURE = (
    PRELUDE_INDEX
    + r"""
local err = bad_type({KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'zset'})
if err then return err end
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[2] then return 0 end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], 'tf')
else redis.call('HSET', KEYS[1], 'tf', ARGV[3]) end
if ARGV[4] == '' then redis.call('ZREM', KEYS[2], ARGV[1])
else redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1]) end
if ARGV[5] == '1' then redis.call('ZADD', KEYS[3], 'NX', now_ms(), ARGV[1])
else redis.call('ZREM', KEYS[3], ARGV[1]) end
return 1
"""
)

# KEYS[1] snapshot hash, KEYS[2] due index, KEYS[3] dead index
# ARGV[1] instance key, ARGV[2] reason
# parks a record that cannot be read: keeps the reason in its hash (field
# 'park'; the snapshot is left as it is), drops it from the due index and
# lists it in the dead index; returns 1, or 0 when the record is gone
PARK = (
    PRELUDE_INDEX
    + r"""
local err = bad_type({KEYS[1], 'hash', KEYS[2], 'zset', KEYS[3], 'zset'})
if err then return err end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'park', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], 'NX', now_ms(), ARGV[1])
return 1
"""
)
