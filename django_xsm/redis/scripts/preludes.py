"""Lua helpers shared by the scripts (pasted in front of each script's body)."""

from __future__ import annotations

from django_xsm.persistence.records import COMMIT_HISTORY
from django_xsm.redis.keys import LOCK_WAKE_MS, LONG_PART, LONG_PARTS

__all__ = [
    "COMMIT_HISTORY",
    "PRELUDE_COMMIT_ARGS",
    "PRELUDE_COMMIT_IDS",
    "PRELUDE_COMMIT_TYPES",
    "PRELUDE_INBOX",
    "PRELUDE_INDEX",
    "PRELUDE_LOCK_WAKE",
    "PRELUDE_LOG",
    "PRELUDE_LONG",
    "PRELUDE_TYPES",
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

# Long values of the snapshot hash (layout 2). Redis keeps a small hash as a
# compact listpack only while every value is at most hash-max-listpack-value
# bytes (64 by default); one longer value turns the whole hash into a hash
# table, about 270 bytes more per instance. So a value of field f longer
# than LONG_PART bytes and at most LONG_PART * LONG_PARTS is kept as parts
# f1..fn with their count in fn (f itself absent); shorter and longer values
# stay whole in f. A whole f always wins (records of layout 1, and values
# written by hand). django_xsm.redis.calls.join_long is the Python twin.
PRELUDE_LONG = (
    r"""
local unpack = unpack or table.unpack
local LONG_PART, LONG_PARTS = """
    + f"{LONG_PART}, {LONG_PARTS}"
    + r"""
-- n: the part count when the caller read it already (then f is not whole)
local function long_get(h, f, n)
  if n == nil then
    local r = redis.call('HMGET', h, f, f .. 'n')
    if r[1] or not r[2] then return r[1] end
    n = r[2]
  end
  n = tonumber(n) or 0
  if n < 1 then return false end
  local names = {}
  for i = 1, n do names[i] = f .. i end
  local parts = redis.call('HMGET', h, unpack(names))
  for i = 1, n do if not parts[i] then return false end end
  return table.concat(parts)
end
-- the size of f's value, exact when it may exceed limit (a value in parts
-- is at most LONG_PART bytes a part), and the part count (0: f is whole)
local function long_len(h, f, limit)
  local size = redis.call('HSTRLEN', h, f)
  if size > 0 then return size, 0 end
  local n = tonumber(redis.call('HGET', h, f .. 'n') or '0') or 0
  if n * LONG_PART <= limit then return 0, n end
  for i = 1, n do size = size + redis.call('HSTRLEN', h, f .. i) end
  return size, n
end
-- appends to args (HSET field, value...) and dels (HDEL fields) what
-- storing v in field f of hash h takes; old_n is the part count stored now
-- (the fn field, read before the first write), exists whether h exists,
-- whole whether f is stored whole (nil: unknown)
local function long_set(args, dels, h, f, v, old_n, exists, whole)
  old_n = tonumber(old_n) or 0
  local n = 0
  if #v > LONG_PART and #v <= LONG_PART * LONG_PARTS then
    n = math.ceil(#v / LONG_PART)
    for i = 1, n do
      args[#args + 1] = f .. i
      args[#args + 1] = string.sub(v, (i - 1) * LONG_PART + 1, i * LONG_PART)
    end
    args[#args + 1] = f .. 'n'; args[#args + 1] = n
    -- whole: whether f is stored whole now (nil: unknown, asked here)
    if whole == nil then whole = exists and (old_n == 0 or redis.call('HEXISTS', h, f) == 1) end
    if whole then dels[#dels + 1] = f end
  else
    args[#args + 1] = f; args[#args + 1] = v
    if old_n > 0 then dels[#dels + 1] = f .. 'n' end
  end
  for i = n + 1, old_n do dels[#dels + 1] = f .. i end
end
"""
)

# Helpers shared by several scripts. I = {ix, idx, midx, sidx, due, dead, exp}
# (KeyLayout.index_keys order).
PRELUDE_INDEX = (
    PRELUDE_TYPES
    + PRELUDE_LONG
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
local function index_info(machine, states)
  if states ~= '' then return machine .. '\0' .. states end
  return machine
end
-- old: what HGET ix key gave (read before the first write), nil to read it
local function reindex(I, key, machine, states, old)
  local info = index_info(machine, states)
  if old == nil then old = redis.call('HGET', I[1], key) end
  if old == info then return end
  if old then drop_members(I, key, old) end
  redis.call('HSET', I[1], key, info)
  redis.call('ZADD', I[2], 0, key)
  redis.call('ZADD', I[3], 0, machine .. '\0' .. key)
  if states ~= '' then
    -- the root state (first) named like the machine is active in every
    -- instance of it: the machine index answers it (LIST_PAGE), not sidx
    for i, s in ipairs(split0(states)) do
      if i > 1 or s ~= machine then redis.call('ZADD', I[4], 0, s .. '\0' .. key) end
    end
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

# The snapshot hash's ``cid`` field: the ids of the last COMMIT_HISTORY commits
# with the version each produced, newest first ('id/version id/version ...').
# A client retry can arrive after other writers committed on top of the
# commit it repeats; it must still be recognised, or the caller would see a
# conflict, reload and apply its event a second time. COMMIT_HISTORY is the
# contract's number (django_xsm.persistence.records), shared with memory.
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

# The COMMIT script's decoded argument document, checked field by field
# before its first write: 's' a string, 'n' a number, 'x' a string or a
# number, 'S' a list of strings. Returns nil, or the position and what was
# wanted ("[18][1][3] must be a string") for the error reply.
PRELUDE_COMMIT_ARGS = r"""
local COMMIT_HEADER = {'s', 's', 'n', 'n', 's', 'n', 'n', 's', 's', 'S', 'x', 's', 'n', 'n', 'n'}
local COMMIT_ROWS = {
  [16] = {'n', 's', 's', 's', 's', 'n'},
  [17] = {'n', 's', 's'},
  [18] = {'s', 's', 's', 's', 's', 's', 's', 's', 'n', 's'},
  [19] = {'s', 's'},
}
local WANTED = {s = 'a string', n = 'a number', x = 'a string or a number',
  S = 'a list of strings', t = 'a list'}
local function arg_ok(v, kind)
  local t = type(v)
  if kind == 's' then return t == 'string' end
  if kind == 'n' then return t == 'number' end
  if kind == 'x' then return t == 'string' or t == 'number' end
  if kind == 't' then return t == 'table' end
  if t ~= 'table' then return false end
  for _, item in ipairs(v) do if type(item) ~= 'string' then return false end end
  return true
end
local function commit_arg_error(a, nkeys)
  if type(a) ~= 'table' then return 'document must be a list' end
  for i, kind in ipairs(COMMIT_HEADER) do
    if not arg_ok(a[i], kind) then return '[' .. i .. '] must be ' .. WANTED[kind] end
  end
  -- the log cap goes to XADD MAXLEN, after the snapshot's writes: it must
  -- be an integer XADD reads back as one (the clients' bound, 10^12)
  if a[15] < 0 or a[15] > 1e12 or a[15] % 1 ~= 0 then
    return '[15] must be an integer from 0 to 10^12'
  end
  for i = 16, 19 do
    if not arg_ok(a[i], 't') then return '[' .. i .. '] must be a list' end
    for j, row in ipairs(a[i]) do
      if type(row) ~= 'table' then return '[' .. i .. '][' .. j .. '] must be a list' end
      for k, kind in ipairs(COMMIT_ROWS[i]) do
        if not arg_ok(row[k], kind) then
          return '[' .. i .. '][' .. j .. '][' .. k .. '] must be ' .. WANTED[kind]
        end
      end
      -- marks and releases name their inbox hash by its KEYS index
      if i < 18 and (row[1] < 17 or row[1] > nkeys) then
        return '[' .. i .. '][' .. j .. '][1] is not an inbox KEYS index'
      end
    end
  end
  return nil
end
"""

# COMMIT's type proofs. A wrong-type key must fail the script before its
# first write; a read that fails on a wrong type and runs before every write
# proves its key as well as a TYPE check does, for free when the script
# needs the value anyway. commit_reads does COMMIT's reads of that kind that
# the checks before it did not (the snapshot hash's HMGET, the lock's GET,
# the floors' HGET when creating and the marks' inbox HGETs come first);
# commit_unread lists, for bad_type, the keys this call will write (or
# touch: PEXPIRE, PERSIST) that no read proved. Keys the call leaves alone
# are not checked at all.
PRELUDE_COMMIT_TYPES = r"""
local function commit_reads(KEYS, I, a, exists, cur)
  local r = {pttl = -2}
  if a[7] == 1 then
    r.states = table.concat(a[10], '\0')
    r.info = redis.call('HGET', I[1], a[1])
    r.due = redis.call('ZSCORE', I[5], a[1])
  end
  if exists then r.pttl = redis.call('PTTL', KEYS[1]) end
  if #a[18] > 0 then r.seq = last_seq(KEYS[11]) end
  -- a release wakes a flagged waiter (PRELUDE_LOCK_WAKE): read once, here
  r.waiters = a[6] == 1 and a[5] ~= '' and waiter_flagged(KEYS[15])
  return r
end
local function commit_unread(KEYS, I, a, exists, cur, r)
  local spec, seen = {}, {}
  local function need(k, t)
    if not seen[k] then seen[k] = true; spec[#spec + 1] = k; spec[#spec + 1] = t end
  end
  local after, ttl = exists or a[7] == 1, a[14]
  if a[7] == 1 then
    if ttl > 0 and a[3] ~= 0 then need(KEYS[3], 'hash') end
    if index_info(a[8], r.states) ~= r.info then
      need(I[2], 'zset'); need(I[3], 'zset'); need(I[4], 'zset')
    end
    if cur[6] then need(I[6], 'zset') end
  end
  if a[12] ~= '-' and after then need(I[6], 'zset') end
  if (ttl > 0 and after) or (ttl <= 0 and exists and r.pttl > 0) then
    need(I[7], 'zset')
    if #a[18] == 0 then need(KEYS[11], 'stream') end
  end
  if #a[18] > 0 then need(KEYS[12], 'zset') end
  if #a[16] > 0 or #a[17] > 0 then need(KEYS[13], 'zset') end
  if #a[19] > 0 then need(KEYS[14], 'stream') end
  if r.waiters then need(KEYS[16], 'list') end
  local marked = {}
  for _, m in ipairs(a[16]) do marked[m[1]] = true end
  for _, rl in ipairs(a[17]) do
    if not marked[rl[1]] then need(KEYS[rl[1]], 'hash') end
  end
  return spec
end
"""

# The queueing lock. A caller that finds the lock held flags that it waits
# (lq) and blocks on the wake list (lw, BLPOP); a release pushes one wake-up
# there only when a waiter is flagged, so an uncontended lock costs one
# EXISTS. Redis serves blocked clients first come, first served: each
# release hands the lock to the longest waiter instead of whoever polls
# first. A wake-up pushed before its waiter blocks stays in the list (no
# lost wake-up); a stale one only wakes a waiter early, to try again.
# Needs PRELUDE_TYPES. Both keys are type-checked before they are written,
# like every other key (COMMIT reads the flag in commit_reads and checks lw
# in commit_unread). The flag is read once per release.
PRELUDE_LOCK_WAKE = (
    "\nlocal LOCK_WAKE_MS = "
    + str(LOCK_WAKE_MS)
    + r"""
-- flags a waiter; the WRONGTYPE error (nothing written) when lq holds another type
local function flag_waiter(lq)
  local err = bad_type({lq, 'string'})
  if err then return err end
  redis.call('SET', lq, '1', 'PX', LOCK_WAKE_MS)
  return nil
end
local function waiter_flagged(lq)
  return redis.call('EXISTS', lq) == 1
end
-- only when waiter_flagged, and after bad_type proved lw a list (or absent)
local function wake_waiter(lw)
  redis.call('LPUSH', lw, '1')
  redis.call('LTRIM', lw, 0, 0)
  redis.call('PEXPIRE', lw, LOCK_WAKE_MS)
end
"""
)
