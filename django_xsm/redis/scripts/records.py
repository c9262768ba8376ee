"""Scripts on instance records: schema marker, open, commit, locks, delete, forget."""

from __future__ import annotations

from .preludes import (
    PRELUDE_COMMIT_ARGS,
    PRELUDE_COMMIT_IDS,
    PRELUDE_COMMIT_TYPES,
    PRELUDE_INBOX,
    PRELUDE_INDEX,
    PRELUDE_LOCK_WAKE,
    PRELUDE_LOG,
    PRELUDE_TYPES,
)

__all__ = [
    "ACQUIRE_LOCK",
    "COMMIT",
    "DELETE",
    "FORGET",
    "OPEN",
    "RELEASE_LOCK",
    "SCHEMA",
    "UPGRADE_LAYOUT",
]

# KEYS[1] schema marker hash
# ARGV[1] layout version, ARGV[2] bucket count (used only when creating),
# ARGV[3] a random namespace id (written when creating, or added to a marker
# that has none)
# returns {layout, buckets, id} as stored (creating the marker when absent)
# (nil, nil, nil when the key holds another type: the caller reports it unreadable)
SCHEMA = r"""
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  redis.call('HSET', KEYS[1], 'layout', ARGV[1], 'buckets', ARGV[2])
elseif t ~= 'hash' then
  return {false, false, false}
end
if ARGV[3] and ARGV[3] ~= '' then redis.call('HSETNX', KEYS[1], 'id', ARGV[3]) end
return redis.call('HMGET', KEYS[1], 'layout', 'buckets', 'id')
"""

# KEYS[1] snapshot hash, KEYS[2] lock, KEYS[3] floors hash, KEYS[4] lock
# waiters flag, then per claim i (0-based): KEYS[5+2i] inbox hash,
# KEYS[6+2i] inbox expiry
# ARGV[1] instance key, ARGV[2] lock token ('' = no lock), ARGV[3] lock ttl ms,
# ARGV[4] claim count N, ARGV[5] max snapshot bytes,
# then per claim: field, fingerprint, owner, lease ms
# returns {busy_ms, floor, {{status, receipt, retry_after_ms}...},
#          {d, v, mv, m, u, tf} (HMGET of the snapshot hash), locked 0/1,
#          exists 0/1, 0, held_ms (no token: the holder's PTTL, else 0)}
#       | {0, 0, {}, {}, 0, 1, size} when the stored snapshot is over the
#         limit (nothing taken, its bytes not sent)
# A busy lock claims nothing (it flags a waiter: the release wakes one);
# the lock is taken only if every claim is ours.
OPEN = (
    PRELUDE_INDEX
    + PRELUDE_INBOX
    + PRELUDE_LOCK_WAKE
    + r"""
local n = tonumber(ARGV[4])
-- Type proofs before the first write: the lock's GET (read when a token
-- asks for it, the only case that writes it), the snapshot's HSTRLEN, the
-- floors' HGET and each claim's inbox HGET fail on a wrong type; the inbox
-- expiry indexes are written unread, so they are checked.
local spec, seen = {}, {}
for i = 0, n - 1 do
  local inx = KEYS[6 + 2 * i]
  if not seen[inx] then seen[inx] = true; spec[#spec + 1] = inx; spec[#spec + 1] = 'zset' end
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
    local flag_err = flag_waiter(KEYS[4])
    if flag_err then return flag_err end
    return {pttl, 0, {}, {}, 0, 0, 0}
  end
end
local size, parts = long_len(KEYS[1], 'd', tonumber(ARGV[5]))
if size > tonumber(ARGV[5]) then return {0, 0, {}, {}, 0, 1, size} end
-- read everything before the first write
local floor = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0') or 0
-- only the fields a record needs (the commit id history stays on the server)
local fields = redis.call('HMGET', KEYS[1], 'd', 'v', 'mv', 'm', 'u', 'tf')
if parts > 0 then fields[1] = long_get(KEYS[1], 'd', parts) end
-- the floors hash has a key's version only once it could vanish silently
-- (ttl) or was deleted: a live record's own version bounds it too
floor = math.max(floor, tonumber(fields[2]) or 0)
-- a damaged version (not a number below 2^53) must not reach the reply as a
-- number Redis cannot turn into an integer; the caller refuses the record
if not (floor < 9007199254740992) then floor = 9007199254740991 end
local exists = redis.call('EXISTS', KEYS[1])
local replies, all_claimed = {}, true
for i = 0, n - 1 do
  local b = 6 + 4 * i
  local st, receipt, retry = claim_check(KEYS[5 + 2 * i], ARGV[b], ARGV[b + 1], ARGV[b + 2], now)
  replies[#replies + 1] = {st, receipt, retry}
  if st ~= 'claimed' then all_claimed = false end
end
if all_claimed then
  for i = 0, n - 1 do
    local b = 6 + 4 * i
    put_row(KEYS[5 + 2 * i], KEYS[6 + 2 * i], ARGV[b],
      {s = 'f', fp = ARGV[b + 1], o = ARGV[b + 2]}, now + tonumber(ARGV[b + 3]))
  end
  if token ~= '' then redis.call('SET', KEYS[2], token, 'PX', ARGV[3]) end
end
local locked, held = 0, 0
if all_claimed and token ~= '' then locked = 1 end
-- an optimistic open is told how long another writer still holds the lock
-- (its commit would lose to that holder): the adaptive lock's first try
-- then queues at once instead of running the view to lose at commit
if token == '' then
  held = redis.call('PTTL', KEYS[2])
  if held < 0 then held = 0 end
end
return {0, floor, replies, fields, locked, exists, 0, held}
"""
)

# KEYS[1] snapshot hash, KEYS[2] lock, KEYS[3] floors, KEYS[4..10] index keys
# (ix idx midx sidx due dead exp), KEYS[11] log stream, KEYS[12] log index,
# KEYS[13] inbox expiry, KEYS[14] outbox stream, KEYS[15] lock waiters flag,
# KEYS[16] lock wake list, KEYS[17..] inbox hashes referenced by marks/releases
# ARGV[1] encoded snapshot ('' when none is written; may be binary),
# ARGV[2] the rest as one JSON array (one argument instead of dozens: packing
# each one costs the client more than the script's cjson.decode):
#   [1] instance key, [2] commit id, [3] expected version, [4] floor,
#   [5] lock token, [6] release lock 0/1, [7] write snapshot 0/1,
#   [8] machine id, [9] machine version, [10] active state ids (list),
#   [11] next due ms ('' = none), [12] timer failures ('-' = unchanged,
#   '' = none, else JSON), [13] any dead-lettered 0/1, [14] ttl ms (0: no
#   expiry), [15] log maxlen (0 = unbounded),
#   [16] marks: [[inbox KEYS index, field, fingerprint, owner, receipt JSON,
#        ttl ms], ...],
#   [17] releases: [[inbox KEYS index, field, owner], ...],
#   [18] log entries: [[event, payload, actor, reason, from, to, idem key,
#        correlation id, timestamp ms, accepted], ...],
#   [19] emitted events: [[delivery id, event JSON], ...] (XADD to the outbox
#        with the instance key, machine, version, 0 attempts and the time)
# returns {'ok', version, first_seq, now, tf or false (as stored now)}
#       | {'dup', version, 0, updated}
#       (dup: the commit id is one of the recent ones; version is what it made)
#       | {'conflict', actual or -1} | {'lock', actual or -1}
#       | {'claim', actual or -1}
#       | {'corrupt', -1} (version field unreadable, or not below 2^53)
# A unit that writes no snapshot for an absent key creates no record (its
# marks and log entries still land, with version 0).
COMMIT = (
    PRELUDE_INDEX
    + PRELUDE_INBOX
    + PRELUDE_LOG
    + PRELUDE_COMMIT_IDS
    + PRELUDE_COMMIT_ARGS
    + PRELUDE_LOCK_WAKE  # before PRELUDE_COMMIT_TYPES: commit_reads calls it
    + PRELUDE_COMMIT_TYPES
    + r"""
local a = cjson.decode(ARGV[2])
-- Argument types first: a wrong type found by a redis.call half way
-- (XADD refuses a null actor) would leave the first writes in place.
local arg_err = commit_arg_error(a, #KEYS)
if arg_err then return redis.error_reply('ERR COMMIT argument ' .. arg_err) end
local key, cid, token = a[1], a[2], a[5]
-- Key types are proven before the first write (PRELUDE_COMMIT_TYPES): by
-- the reads below, which fail on a wrong type, and a TYPE check of each
-- key this call writes unread.
local cur = redis.call('HMGET', KEYS[1], 'v', 'cid', 'u', 'dn', 'cidn', 'park', 'tf')
local cid_whole = cur[2] and true or false
if not cur[2] and cur[5] then cur[2] = long_get(KEYS[1], 'cid', cur[5]) end
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and not (tonumber(cur[1]) and tonumber(cur[1]) < 9007199254740992) then
  return {'corrupt', -1}
end
local seen = applied_version(cur[2], cid)
if seen then return {'dup', seen, 0, tonumber(cur[3])} end
local now = now_ms()
local expected, floor_seen = a[3], a[4]
local actual = -1
if cur[1] then actual = tonumber(cur[1]) end
local marks, releases, entries = a[16], a[17], a[18]
if expected == 0 then
  local floor = tonumber(redis.call('HGET', KEYS[3], key) or '0')
  if cur[1] or floor ~= floor_seen then return {'conflict', actual} end
elseif actual ~= expected then
  return {'conflict', actual}
end
local holder = redis.call('GET', KEYS[2])
if (holder and holder ~= token) or (not holder and token ~= '') then
  return {'lock', actual}
end
for _, m in ipairs(marks) do
  if not owned_or_free(KEYS[m[1]], m[2], m[4], now) then
    return {'claim', actual}
  end
end
local I = {KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]}
local pre = commit_reads(KEYS, I, a, exists, cur)
local err = bad_type(commit_unread(KEYS, I, a, exists, cur, pre))
if err then return err end
-- every check passed: write
local version = actual
if a[7] == 1 then
  version = math.max(expected, floor_seen) + 1
  local args, dels = {'v', version, 'm', a[8], 'mv', a[9], 'u', string.format('%.0f', now)}, {}
  long_set(args, dels, KEYS[1], 'd', ARGV[1], cur[4], exists)
  long_set(args, dels, KEYS[1], 'cid', remember(cur[2], cid, version), cur[5], exists,
    cid_whole)
  redis.call('HSET', KEYS[1], unpack(args))
  if #dels > 0 then redis.call('HDEL', KEYS[1], unpack(dels)) end
  -- the floor is needed once the record can vanish without a script (ttl);
  -- DELETE and FORGET write it themselves
  if a[14] > 0 then redis.call('HSET', KEYS[3], key, version) end
  -- a record parked as unreadable (PARK) is readable again
  if cur[6] then
    redis.call('HDEL', KEYS[1], 'park')
    if redis.call('HEXISTS', KEYS[1], 'tf') == 0 then redis.call('ZREM', I[6], key) end
  end
  reindex(I, key, a[8], pre.states, pre.info)
  if a[11] == '' then
    if pre.due then redis.call('ZREM', I[5], key) end
  elseif tonumber(pre.due) ~= tonumber(a[11]) then
    redis.call('ZADD', I[5], a[11], key)
  end
  exists = true
elseif exists then
  local args, dels = {}, {}
  long_set(args, dels, KEYS[1], 'cid', remember(cur[2], cid, version), cur[5], true,
    cid_whole)
  redis.call('HSET', KEYS[1], unpack(args))
  if #dels > 0 then redis.call('HDEL', KEYS[1], unpack(dels)) end
else
  version = 0
end
local tf = cur[7]
if a[12] ~= '-' and exists then
  tf = a[12] ~= '' and a[12]
  if a[12] == '' then redis.call('HDEL', KEYS[1], 'tf')
  else redis.call('HSET', KEYS[1], 'tf', a[12]) end
  if a[13] == 1 then redis.call('ZADD', I[6], 'NX', now, key)
  else redis.call('ZREM', I[6], key) end
end
for _, m in ipairs(marks) do
  put_row(KEYS[m[1]], KEYS[13], m[2], {s = 'd', fp = m[3], o = m[4], r = m[5]}, now + m[6])
end
for _, r in ipairs(releases) do
  release_row(KEYS[r[1]], KEYS[13], r[2], r[3])
end
local first = 0
if #entries > 0 then
  local seq = pre.seq
  for _, e in ipairs(entries) do
    seq = seq + 1
    if first == 0 then first = seq end
    log_add(KEYS[11], KEYS[12], key, seq, a[15], version, e, 1)
  end
end
local stamp = string.format('%.0f', now)
for _, e in ipairs(a[19]) do
  redis.call('XADD', KEYS[14], '*', 'id', e[1], 'k', key, 'm', a[8], 'v', version,
    'e', e[2], 'a', 0, 't', stamp)
end
local ttl = a[14]
if ttl > 0 and exists then
  redis.call('PEXPIRE', KEYS[1], ttl)
  if redis.call('EXISTS', KEYS[11]) == 1 then redis.call('PEXPIRE', KEYS[11], ttl) end
  redis.call('ZADD', I[7], now + ttl, key)
elseif exists and pre.pttl > 0 and redis.call('PERSIST', KEYS[1]) == 1 then
  -- written before under a ttl_s this store does not have: HSET alone
  -- would keep that expiry running
  redis.call('PERSIST', KEYS[11])
  redis.call('ZREM', I[7], key)
end
if a[6] == 1 and token ~= '' then
  redis.call('DEL', KEYS[2])
  if pre.waiters then wake_waiter(KEYS[16]) end
end
if not exists then tf = false end
return {'ok', version, first, now, tf}
"""
)

# KEYS[1] lock, KEYS[2] lock waiters flag; ARGV[1] token, ARGV[2] ttl ms
# returns 0 when the caller holds the lock now, else the holder's PTTL (>= 1)
# (and flags a waiter: the release wakes one)
ACQUIRE_LOCK = (
    PRELUDE_TYPES
    + PRELUDE_LOCK_WAKE
    + r"""
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]); return 0 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
local err = flag_waiter(KEYS[2])
if err then return err end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 1 then return 1 end
return pttl
"""
)

# KEYS[1] lock, KEYS[2] lock waiters flag, KEYS[3] lock wake list; ARGV[1] token
# returns 1 when released (waking the longest waiter, if any), 0 when not ours
RELEASE_LOCK = (
    PRELUDE_TYPES
    + PRELUDE_LOCK_WAKE
    + r"""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local waiters = waiter_flagged(KEYS[2])
if waiters then
  local err = bad_type({KEYS[3], 'list'})
  if err then return err end
end
redis.call('DEL', KEYS[1])
if waiters then wake_waiter(KEYS[3]) end
return 1
"""
)

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

# KEYS[1] schema marker hash; ARGV[1] the layout to upgrade from, ARGV[2] to
# returns the layout stored afterwards (false when there is no marker or it
# is not a hash): the marker moves from ARGV[1] to ARGV[2] only, never back
UPGRADE_LAYOUT = r"""
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return false end
local layout = redis.call('HGET', KEYS[1], 'layout')
if layout == ARGV[1] then
  redis.call('HSET', KEYS[1], 'layout', ARGV[2])
  return ARGV[2]
end
return layout
"""
