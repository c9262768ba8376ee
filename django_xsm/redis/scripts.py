"""Every Lua script of django-xsm, each a constant with its contract.

Rules every script follows:

* all checks come before the first write (Redis does not roll back a
  script that fails half way);
* one hash slot per call: every key shares the ``{prefix:bucket}`` tag;
* time is the server's (``TIME``), never the caller's, for expiry;
* index members are pruned through ``PRELUDE_INDEX`` so no index keeps a
  key whose snapshot is gone.

Scripts are registered once per client (``register_script``) and called by
SHA; redis-py reloads them transparently after ``SCRIPT FLUSH`` (NOSCRIPT).
"""

from __future__ import annotations

__all__ = [
    "ACQUIRE_LOCK",
    "CLAIM",
    "COMMIT",
    "DELETE",
    "DUE",
    "FORGET",
    "FORGET_SCOPE",
    "LIST_PAGE",
    "LOG_APPEND",
    "LOG_PURGE",
    "MARK",
    "OPEN",
    "PRUNE_EXPIRED",
    "PURGE_INBOX",
    "RECORD_TIMER_FAILURE",
    "RELEASE",
    "RELEASE_LOCK",
    "SCHEMA",
]

# Type guard: a key of another type (written by something else) must fail a
# script before its first write, not half way (Redis does not roll back).
PRELUDE_TYPES = r"""
local function bad_type(spec)
  for i = 1, #spec, 2 do
    local t = redis.call('TYPE', spec[i])['ok']
    if t ~= 'none' and t ~= spec[i + 1] then
      return redis.error_reply('WRONGTYPE ' .. spec[i] .. ' holds a ' .. t ..
        ', expected a ' .. spec[i + 1])
    end
  end
  return nil
end
local function index_types(I, spec)
  spec = spec or {}
  spec[#spec + 1] = I[1]; spec[#spec + 1] = 'hash'
  for j = 2, 7 do spec[#spec + 1] = I[j]; spec[#spec + 1] = 'zset' end
  return spec
end
"""

# Helpers shared by several scripts. I = {ix, idx, midx, sidx, due, dead, exp}
# (KeyLayout.index_keys order).
PRELUDE_INDEX = (
    PRELUDE_TYPES
    + r"""
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function split0(s)
  local out, start = {}, 1
  while true do
    local i = string.find(s, '\0', start, true)
    if not i then out[#out + 1] = string.sub(s, start); return out end
    out[#out + 1] = string.sub(s, start, i - 1)
    start = i + 1
  end
end
local function drop_members(I, key, info)
  local parts = split0(info)
  redis.call('ZREM', I[3], parts[1] .. '\0' .. key)
  for j = 2, #parts do redis.call('ZREM', I[4], parts[j] .. '\0' .. key) end
end
local function unindex(I, key)
  local info = redis.call('HGET', I[1], key)
  if info then drop_members(I, key, info); redis.call('HDEL', I[1], key) end
  for j = 2, 7 do if j ~= 3 and j ~= 4 then redis.call('ZREM', I[j], key) end end
end
-- a key whose snapshot is gone: out of every index, and out of the log
-- index too once its log stream has gone with it (ttl_s expires both)
local function prune(I, key, lidx, log_prefix)
  unindex(I, key)
  if redis.call('EXISTS', log_prefix .. key) == 0 then redis.call('ZREM', lidx, key) end
end
local function machine_of(I, key)
  local info = redis.call('HGET', I[1], key)
  if not info then return nil end
  local i = string.find(info, '\0', 1, true)
  if i then return string.sub(info, 1, i - 1) end
  return info
end
local function reindex(I, key, machine, states)
  local info = machine
  if states ~= '' then info = machine .. '\0' .. states end
  local old = redis.call('HGET', I[1], key)
  if old == info then return end
  if old then drop_members(I, key, old) end
  redis.call('HSET', I[1], key, info)
  redis.call('ZADD', I[2], 0, key)
  redis.call('ZADD', I[3], 0, machine .. '\0' .. key)
  if states ~= '' then
    for _, s in ipairs(split0(states)) do redis.call('ZADD', I[4], 0, s .. '\0' .. key) end
  end
end
"""
)

PRELUDE_INBOX = r"""
local function claim_check(h, field, fp, owner, now)
  local raw = redis.call('HGET', h, field)
  if not raw then return 'claimed', '', 0 end
  local ok, row = pcall(cjson.decode, raw)
  if not ok or type(row) ~= 'table' then return 'claimed', '', 0 end
  local exp = tonumber(row.x) or 0
  if exp <= now then return 'claimed', '', 0 end
  if row.fp ~= fp then return 'mismatch', '', 0 end
  if row.s == 'd' then return 'done', row.r or '', 0 end
  if row.o == owner then return 'claimed', '', 0 end
  return 'in_flight', '', exp - now
end
local function put_row(h, inx, field, row, exp)
  row.x = string.format('%.0f', exp)
  redis.call('HSET', h, field, cjson.encode(row))
  redis.call('ZADD', inx, exp, h .. '\0' .. field)
end
local function release_row(h, inx, field, owner)
  local raw = redis.call('HGET', h, field)
  if not raw then return 0 end
  local ok, row = pcall(cjson.decode, raw)
  if not ok or type(row) ~= 'table' or row.s == 'd' or row.o ~= owner then return 0 end
  redis.call('HDEL', h, field)
  redis.call('ZREM', inx, h .. '\0' .. field)
  return 1
end
local function owned_or_free(h, field, owner, now)
  local raw = redis.call('HGET', h, field)
  if not raw then return true end
  local ok, row = pcall(cjson.decode, raw)
  if not ok or type(row) ~= 'table' then return true end
  if (tonumber(row.x) or 0) <= now then return true end
  return row.s ~= 'd' and row.o == owner
end
"""

PRELUDE_LOG = r"""
local unpack = unpack or table.unpack
local function last_seq(stream)
  local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  if #last > 0 then return tonumber(string.match(last[1][1], '^(%d+)')) end
  if redis.call('EXISTS', stream) == 0 then return 0 end
  -- every entry was purged: the stream still remembers its last id
  local info = redis.call('XINFO', 'STREAM', stream)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      return tonumber(string.match(info[i + 1], '^(%d+)'))
    end
  end
  return 0
end
local function log_add(stream, lidx, key, seq, maxlen, version, a, base)
  -- a[base..base+9] = event, payload, actor, reason, from, to, idem key,
  -- correlation id, timestamp ms, accepted
  local id = string.format('%.0f', seq) .. '-0'
  local fields = {'v', version, 'e', a[base], 'p', a[base + 1], 'a', a[base + 2],
    'r', a[base + 3], 'f', a[base + 4], 't', a[base + 5], 'k', a[base + 6],
    'c', a[base + 7], 'ts', a[base + 8], 'ok', a[base + 9]}
  if maxlen > 0 then
    redis.call('XADD', stream, 'MAXLEN', '~', maxlen, id, unpack(fields))
  else
    redis.call('XADD', stream, id, unpack(fields))
  end
  redis.call('ZADD', lidx, 'NX', a[base + 8], key)
end
"""

# KEYS[1] schema marker hash
# ARGV[1] layout version, ARGV[2] bucket count (used only when creating)
# returns {layout, buckets} as stored (creating the marker when absent)
# (nil, nil when the key holds another type: the caller reports it unreadable)
SCHEMA = r"""
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  redis.call('HSET', KEYS[1], 'layout', ARGV[1], 'buckets', ARGV[2])
elseif t ~= 'hash' then
  return {false, false}
end
return redis.call('HMGET', KEYS[1], 'layout', 'buckets')
"""

# KEYS[1] snapshot hash, KEYS[2] lock, KEYS[3] floors hash,
# then per claim i (0-based): KEYS[4+2i] inbox hash, KEYS[5+2i] inbox expiry
# ARGV[1] instance key, ARGV[2] lock token ('' = no lock), ARGV[3] lock ttl ms,
# ARGV[4] claim count N, then per claim: field, fingerprint, owner, lease ms
# returns {busy_ms, floor, {{status, receipt, retry_after_ms}...}, hgetall,
#          locked 0/1}
# A busy lock claims nothing; the lock is taken only if every claim is ours.
OPEN = (
    PRELUDE_INDEX
    + PRELUDE_INBOX
    + r"""
local n = tonumber(ARGV[4])
local spec = {KEYS[1], 'hash', KEYS[2], 'string', KEYS[3], 'hash'}
for i = 0, n - 1 do
  spec[#spec + 1] = KEYS[4 + 2 * i]; spec[#spec + 1] = 'hash'
  spec[#spec + 1] = KEYS[5 + 2 * i]; spec[#spec + 1] = 'zset'
end
local err = bad_type(spec)
if err then return err end
local now = now_ms()
local token = ARGV[2]
if token ~= '' then
  local holder = redis.call('GET', KEYS[2])
  if holder and holder ~= token then
    local pttl = redis.call('PTTL', KEYS[2])
    if pttl < 1 then pttl = 1 end
    return {pttl, 0, {}, {}, 0}
  end
end
-- read everything before the first write
local floor = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0') or 0
local fields = redis.call('HGETALL', KEYS[1])
local replies, all_claimed = {}, true
for i = 0, n - 1 do
  local b = 5 + 4 * i
  local st, receipt, retry = claim_check(KEYS[4 + 2 * i], ARGV[b], ARGV[b + 1], ARGV[b + 2], now)
  replies[#replies + 1] = {st, receipt, retry}
  if st ~= 'claimed' then all_claimed = false end
end
if all_claimed then
  for i = 0, n - 1 do
    local b = 5 + 4 * i
    put_row(KEYS[4 + 2 * i], KEYS[5 + 2 * i], ARGV[b],
      {s = 'f', fp = ARGV[b + 1], o = ARGV[b + 2]}, now + tonumber(ARGV[b + 3]))
  end
  if token ~= '' then redis.call('SET', KEYS[2], token, 'PX', ARGV[3]) end
end
local locked = 0
if all_claimed and token ~= '' then locked = 1 end
return {0, floor, replies, fields, locked}
"""
)

# The snapshot hash's ``cid`` field: the ids of the last COMMIT_HISTORY commits
# with the version each produced, newest first ('id/version id/version ...').
# A client retry can arrive after other writers committed on top of the
# commit it repeats; it must still be recognised, or the caller would see a
# conflict, reload and apply its event a second time.
COMMIT_HISTORY = 8
PRELUDE_COMMIT_IDS = (
    r"""
local function applied_version(history, id)
  if not history then return nil end
  for tok in string.gmatch(history, '%S+') do
    local cid, v = string.match(tok, '^(.*)/(%d+)$')
    if cid == id then return tonumber(v) end
  end
  return nil
end
local function remember(history, id, version)
  local out = {id .. '/' .. string.format('%.0f', version)}
  if history then
    for tok in string.gmatch(history, '%S+') do
      if #out >= """
    + str(COMMIT_HISTORY)
    + r""" then break end
      out[#out + 1] = tok
    end
  end
  return table.concat(out, ' ')
end
"""
)

# KEYS[1] snapshot hash, KEYS[2] lock, KEYS[3] floors, KEYS[4..10] index keys
# (ix idx midx sidx due dead exp), KEYS[11] log stream, KEYS[12] log index,
# KEYS[13] inbox expiry, KEYS[14..] inbox hashes referenced by marks/releases
# ARGV[1] instance key, ARGV[2] commit id, ARGV[3] expected version,
# ARGV[4] floor, ARGV[5] lock token, ARGV[6] release lock 0/1,
# ARGV[7] write snapshot 0/1, ARGV[8] encoded snapshot, ARGV[9] machine id,
# ARGV[10] machine version, ARGV[11] state ids joined by NUL,
# ARGV[12] next due ms ('' = none), ARGV[13] timer failures ('-' = unchanged,
# '' = none, else JSON), ARGV[14] any dead-lettered 0/1, ARGV[15] ttl ms,
# ARGV[16] log maxlen (0 = unbounded), ARGV[17] marks M, ARGV[18] releases R,
# ARGV[19] log entries L, then M x (inbox KEYS index, field, fingerprint,
# owner, receipt JSON, ttl ms), R x (inbox KEYS index, field, owner),
# L x (event, payload, actor, reason, from, to, idem key, correlation id,
# timestamp ms, accepted)
# returns {'ok', version, first_seq, now} | {'dup', version, 0, updated}
#       (dup: the commit id is one of the recent ones; version is what it made)
#       | {'conflict', actual or -1} | {'lock', actual or -1}
#       | {'claim', actual or -1} | {'corrupt', -1} (version field unreadable)
# A unit that writes no snapshot for an absent key creates no record (its
# marks and log entries still land, with version 0).
COMMIT = (
    PRELUDE_INDEX
    + PRELUDE_INBOX
    + PRELUDE_LOG
    + PRELUDE_COMMIT_IDS
    + r"""
local key = ARGV[1]
local spec = {KEYS[1], 'hash', KEYS[2], 'string', KEYS[3], 'hash', KEYS[11], 'stream',
  KEYS[12], 'zset', KEYS[13], 'zset'}
index_types({KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]}, spec)
for j = 14, #KEYS do spec[#spec + 1] = KEYS[j]; spec[#spec + 1] = 'hash' end
local err = bad_type(spec)
if err then return err end
local cur = redis.call('HMGET', KEYS[1], 'v', 'cid', 'u')
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and not tonumber(cur[1]) then return {'corrupt', -1} end
local seen = applied_version(cur[2], ARGV[2])
if seen then return {'dup', seen, 0, tonumber(cur[3])} end
local now = now_ms()
local expected = tonumber(ARGV[3])
local actual = -1
if cur[1] then actual = tonumber(cur[1]) end
if expected == 0 then
  local floor = tonumber(redis.call('HGET', KEYS[3], key) or '0')
  if cur[1] or floor ~= tonumber(ARGV[4]) then return {'conflict', actual} end
elseif actual ~= expected then
  return {'conflict', actual}
end
local holder = redis.call('GET', KEYS[2])
if (holder and holder ~= ARGV[5]) or (not holder and ARGV[5] ~= '') then
  return {'lock', actual}
end
local M, R, L = tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[19])
local mb, rb, lb = 20, 20 + 6 * M, 20 + 6 * M + 3 * R
for i = 0, M - 1 do
  local b = mb + 6 * i
  if not owned_or_free(KEYS[tonumber(ARGV[b])], ARGV[b + 1], ARGV[b + 3], now) then
    return {'claim', actual}
  end
end
-- every check passed: write
local I = {KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]}
local version = actual
if ARGV[7] == '1' then
  version = math.max(expected, tonumber(ARGV[4])) + 1
  redis.call('HSET', KEYS[1], 'd', ARGV[8], 'v', version, 'm', ARGV[9],
    'mv', ARGV[10], 'u', string.format('%.0f', now), 'cid', remember(cur[2], ARGV[2], version))
  redis.call('HSET', KEYS[3], key, version)
  reindex(I, key, ARGV[9], ARGV[11])
  if ARGV[12] == '' then redis.call('ZREM', I[5], key)
  else redis.call('ZADD', I[5], ARGV[12], key) end
  exists = true
elseif exists then
  redis.call('HSET', KEYS[1], 'cid', remember(cur[2], ARGV[2], version))
else
  version = 0
end
if ARGV[13] ~= '-' and exists then
  if ARGV[13] == '' then redis.call('HDEL', KEYS[1], 'tf')
  else redis.call('HSET', KEYS[1], 'tf', ARGV[13]) end
  if ARGV[14] == '1' then redis.call('ZADD', I[6], 'NX', now, key)
  else redis.call('ZREM', I[6], key) end
end
for i = 0, M - 1 do
  local b = mb + 6 * i
  put_row(KEYS[tonumber(ARGV[b])], KEYS[13], ARGV[b + 1],
    {s = 'd', fp = ARGV[b + 2], o = ARGV[b + 3], r = ARGV[b + 4]}, now + tonumber(ARGV[b + 5]))
end
for i = 0, R - 1 do
  local b = rb + 3 * i
  release_row(KEYS[tonumber(ARGV[b])], KEYS[13], ARGV[b + 1], ARGV[b + 2])
end
local first = 0
if L > 0 then
  local seq = last_seq(KEYS[11])
  local maxlen = tonumber(ARGV[16])
  for i = 0, L - 1 do
    seq = seq + 1
    if first == 0 then first = seq end
    log_add(KEYS[11], KEYS[12], key, seq, maxlen, version, ARGV, lb + 10 * i)
  end
end
local ttl = tonumber(ARGV[15])
if ttl > 0 and exists then
  redis.call('PEXPIRE', KEYS[1], ttl)
  if redis.call('EXISTS', KEYS[11]) == 1 then redis.call('PEXPIRE', KEYS[11], ttl) end
  redis.call('ZADD', I[7], now + ttl, key)
end
if ARGV[6] == '1' and ARGV[5] ~= '' then redis.call('DEL', KEYS[2]) end
return {'ok', version, first, now}
"""
)

# KEYS[1] lock; ARGV[1] token, ARGV[2] ttl ms
# returns 0 when the caller holds the lock now, else the holder's PTTL (>= 1)
ACQUIRE_LOCK = r"""
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]); return 0 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 1 then return 1 end
return pttl
"""

# KEYS[1] lock; ARGV[1] token; returns 1 when released, 0 when not ours
RELEASE_LOCK = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS[1] inbox hash, KEYS[2] inbox expiry
# ARGV[1] field, ARGV[2] fingerprint, ARGV[3] owner, ARGV[4] lease ms
# returns {status, receipt, retry_after_ms}; writes the lease when claimed
CLAIM = (
    PRELUDE_INDEX
    + PRELUDE_INBOX
    + r"""
local err = bad_type({KEYS[1], 'hash', KEYS[2], 'zset'})
if err then return err end
local now = now_ms()
local st, receipt, retry = claim_check(KEYS[1], ARGV[1], ARGV[2], ARGV[3], now)
if st == 'claimed' then
  put_row(KEYS[1], KEYS[2], ARGV[1], {s = 'f', fp = ARGV[2], o = ARGV[3]}, now + tonumber(ARGV[4]))
end
return {st, receipt, retry}
"""
)

# KEYS[1] inbox hash, KEYS[2] inbox expiry
# ARGV[1] field, ARGV[2] fingerprint, ARGV[3] owner, ARGV[4] receipt JSON,
# ARGV[5] ttl ms; returns 1 when marked, 0 when the claim is someone else's
MARK = (
    PRELUDE_INDEX
    + PRELUDE_INBOX
    + r"""
local err = bad_type({KEYS[1], 'hash', KEYS[2], 'zset'})
if err then return err end
local now = now_ms()
if not owned_or_free(KEYS[1], ARGV[1], ARGV[3], now) then return 0 end
put_row(KEYS[1], KEYS[2], ARGV[1], {s = 'd', fp = ARGV[2], o = ARGV[3], r = ARGV[4]},
  now + tonumber(ARGV[5]))
return 1
"""
)

# KEYS[1] inbox hash, KEYS[2] inbox expiry; ARGV[1] field, ARGV[2] owner
# returns 1 when an unfinished claim of the owner was dropped
RELEASE = (
    PRELUDE_TYPES
    + PRELUDE_INBOX
    + r"""
local err = bad_type({KEYS[1], 'hash', KEYS[2], 'zset'})
if err then return err end
return release_row(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
"""
)

# KEYS[1] inbox expiry of one bucket; ARGV[1] limit
# returns the number of expired rows removed (cost: expired rows only)
PURGE_INBOX = (
    PRELUDE_INDEX
    + r"""
local now = now_ms()
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, m in ipairs(members) do
  local i = string.find(m, '\0', 1, true)
  if i then redis.call('HDEL', string.sub(m, 1, i - 1), string.sub(m, i + 1)) end
  redis.call('ZREM', KEYS[1], m)
end
return #members
"""
)

# KEYS[1] the scope's inbox hash in one bucket, KEYS[2] that bucket's expiry
# returns the number of rows removed; touches no other scope
FORGET_SCOPE = r"""
local fields = redis.call('HKEYS', KEYS[1])
for _, f in ipairs(fields) do redis.call('ZREM', KEYS[2], KEYS[1] .. '\0' .. f) end
redis.call('DEL', KEYS[1])
return #fields
"""

# KEYS[1] snapshot hash, KEYS[2] floors, KEYS[3..9] index keys
# ARGV[1] instance key; returns 1 when a record was deleted (lock and log stay)
DELETE = (
    PRELUDE_INDEX
    + r"""
local I = {KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]}
local err = bad_type(index_types(I, {KEYS[1], 'hash', KEYS[2], 'hash'}))
if err then return err end
local v = redis.call('HGET', KEYS[1], 'v')
unindex(I, ARGV[1])
if not v then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], v)
redis.call('DEL', KEYS[1])
return 1
"""
)

# KEYS[1] snapshot hash, KEYS[2] floors, KEYS[3..9] index keys, KEYS[10] lock,
# KEYS[11] log stream, KEYS[12] log index; ARGV[1] instance key
# returns {snapshot, deadlines, lock, log records} removed
FORGET = (
    PRELUDE_INDEX
    + r"""
local I = {KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]}
local err = bad_type(index_types(I, {KEYS[1], 'hash', KEYS[2], 'hash', KEYS[10], 'string',
  KEYS[11], 'stream', KEYS[12], 'zset'}))
if err then return err end
local key = ARGV[1]
local v = redis.call('HGET', KEYS[1], 'v')
local due = 0
if redis.call('ZSCORE', I[5], key) then due = 1 end
local records = 0
if redis.call('EXISTS', KEYS[11]) == 1 then records = redis.call('XLEN', KEYS[11]) end
unindex(I, key)
if v then redis.call('HSET', KEYS[2], key, v) end
local snap = redis.call('DEL', KEYS[1])
local lock = redis.call('DEL', KEYS[10])
redis.call('DEL', KEYS[11])
redis.call('ZREM', KEYS[12], key)
return {snap, due, lock, records}
"""
)

# KEYS[1..7] index keys of one bucket, KEYS[8] its log index;
# ARGV[1] until ms, ARGV[2] limit, ARGV[3] snapshot key prefix of the bucket,
# ARGV[4] log key prefix of the bucket
# returns {key, due, key, due...} earliest first; keys whose snapshot has
# expired are pruned from every index instead of returned
DUE = (
    PRELUDE_INDEX
    + r"""
local I = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]}
local err = bad_type(index_types(I, {KEYS[8], 'zset'}))
if err then return err end
local limit = tonumber(ARGV[2])
local out, offset = {}, 0
while #out < 2 * limit do
  local rows = redis.call('ZRANGEBYSCORE', I[5], '-inf', ARGV[1], 'WITHSCORES',
    'LIMIT', offset, limit)
  if #rows == 0 then break end
  for i = 1, #rows, 2 do
    if redis.call('EXISTS', ARGV[3] .. rows[i]) == 1 then
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
# returns up to limit live keys in lexicographic order (dead ones pruned)
LIST_PAGE = (
    PRELUDE_INDEX
    + r"""
local I = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]}
local err = bad_type(index_types(I, {KEYS[8], 'zset'}))
if err then return err end
local index = I[tonumber(ARGV[1])]
local limit = tonumber(ARGV[4])
local strip = tonumber(ARGV[5])
local out, min = {}, ARGV[2]
while #out < limit do
  local rows = redis.call('ZRANGEBYLEX', index, min, ARGV[3], 'LIMIT', 0, limit)
  if #rows == 0 then break end
  for _, m in ipairs(rows) do
    local key = string.sub(m, strip + 1)
    if redis.call('EXISTS', ARGV[6] .. key) == 1 then
      if #out < limit and (ARGV[8] ~= '1' or machine_of(I, key) == ARGV[9]) then
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
"""
)

# KEYS[1..7] index keys of one bucket, KEYS[8] its log index; ARGV[1] limit,
# ARGV[2] snapshot key prefix, ARGV[3] log key prefix
# prunes keys whose idle expiry passed; returns how many
PRUNE_EXPIRED = (
    PRELUDE_INDEX
    + r"""
local I = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]}
local err = bad_type(index_types(I, {KEYS[8], 'zset'}))
if err then return err end
local now = now_ms()
local keys = redis.call('ZRANGEBYSCORE', I[7], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local n = 0
for _, key in ipairs(keys) do
  if redis.call('EXISTS', ARGV[2] .. key) == 0 then prune(I, key, KEYS[8], ARGV[3]); n = n + 1
  else redis.call('ZREM', I[7], key) end
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

# KEYS[1] log stream, KEYS[2] log index
# ARGV[1] instance key, ARGV[2] seq (0 = last + 1), ARGV[3] maxlen,
# ARGV[4] version, ARGV[5..14] the entry (as in COMMIT)
# returns the seq used, or -1 when an explicit seq is not above the last
LOG_APPEND = (
    PRELUDE_TYPES
    + PRELUDE_LOG
    + r"""
local err = bad_type({KEYS[1], 'stream', KEYS[2], 'zset'})
if err then return err end
local last = last_seq(KEYS[1])
local seq = tonumber(ARGV[2])
if seq == 0 then seq = last + 1 elseif seq <= last then return -1 end
log_add(KEYS[1], KEYS[2], ARGV[1], seq, tonumber(ARGV[3]), ARGV[4], ARGV, 5)
return seq
"""
)

# KEYS[1] log stream, KEYS[2] log index; ARGV[1] instance key,
# ARGV[2] cutoff ms, ARGV[3] page size
# removes up to one page of records older than the cutoff from the front;
# returns {removed, more 0/1}
LOG_PURGE = (
    PRELUDE_TYPES
    + r"""
local err = bad_type({KEYS[1], 'stream', KEYS[2], 'zset'})
if err then return err end
local rows = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', tonumber(ARGV[3]))
local cutoff = tonumber(ARGV[2])
local removed, keep_id, keep_ts = 0, nil, nil
for _, row in ipairs(rows) do
  local ts = 0
  for i = 1, #row[2], 2 do if row[2][i] == 'ts' then ts = tonumber(row[2][i + 1]) end end
  if ts >= cutoff then keep_id = row[1]; keep_ts = ts; break end
  redis.call('XDEL', KEYS[1], row[1])
  removed = removed + 1
end
if keep_id then
  redis.call('ZADD', KEYS[2], keep_ts, ARGV[1])
  return {removed, 0}
end
if #rows < tonumber(ARGV[3]) then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {removed, 0}
end
return {removed, 1}
"""
)
