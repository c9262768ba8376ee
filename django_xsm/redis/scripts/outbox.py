"""Scripts of the outbox (delivery side): promote retries, reclaim and read
leases, acknowledge, fail, list, redrive and purge dead letters (keys and
fields: docs/outbox.md, "Redis keys")."""

from __future__ import annotations

from .preludes import PRELUDE_INDEX

__all__ = [
    "OUTBOX_ACK",
    "OUTBOX_FAIL",
    "OUTBOX_PENDING",
    "OUTBOX_PROMOTE",
    "OUTBOX_PURGE_DEAD",
    "OUTBOX_READ",
    "OUTBOX_RECLAIM",
    "OUTBOX_REDRIVE",
    "OUTBOX_REDRIVE_PAGE",
    "OUTBOX_STATS",
]

# No redis.pcall: fakeredis hands its error back as userdata. The group is
# looked up with XINFO GROUPS instead of catching NOGROUP / BUSYGROUP.
_PRELUDE_OUTBOX = (
    PRELUDE_INDEX
    + r"""
local function group_info(stream, group)
  if redis.call('EXISTS', stream) == 0 then return nil end
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local f = {}
    for i = 1, #g - 1, 2 do f[g[i]] = g[i + 1] end
    if f['name'] == group then return f end
  end
  return nil
end
-- id 0: entries written before the group existed are delivered too
local function ensure_group(stream, group)
  local g = group_info(stream, group)
  if g then return g end
  redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
  return {['last-delivered-id'] = '0-0'}
end
-- the entries of a one-stream XREADGROUP reply (false when there are none;
-- fakeredis hands the stream's {name, entries} pair back unwrapped)
local function read_rows(reply)
  if type(reply) ~= 'table' or #reply == 0 then return {} end
  if type(reply[1]) == 'table' then return reply[1][2] end
  return reply[2] or {}
end
-- a pending entry's consumer and delivery count (nil when not pending)
local function holder(stream, group, id)
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if #p == 0 then return nil, 0 end
  return p[1][2], p[1][4]
end
local function owned(stream, group, id, consumer, deliveries)
  if not group_info(stream, group) then return false end
  local who, n = holder(stream, group, id)
  return who == consumer and (deliveries == 0 or n == deliveries)
end
-- an entry's fields: names in order, values by name (the last one wins)
local function fields_of(flat)
  local names, map = {}, {}
  for i = 1, #flat - 1, 2 do
    if map[flat[i]] == nil then names[#names + 1] = flat[i] end
    map[flat[i]] = flat[i + 1]
  end
  return names, map
end
local function put(names, map, name, value)
  if map[name] == nil then names[#names + 1] = name end
  map[name] = value
end
local function flat_of(names, map, skip)
  local out = {}
  for _, n in ipairs(names) do
    if map[n] ~= nil and n ~= skip then out[#out + 1] = n; out[#out + 1] = map[n] end
  end
  return out
end
local function entry_at(stream, id)
  local rows = redis.call('XRANGE', stream, id, id)
  if #rows == 0 then return nil end
  return rows[1][2]
end
-- a waiting entry: a JSON list of field, value strings (nil when damaged)
local function decode_flat(raw)
  if not raw then return nil end
  local ok, v = pcall(cjson.decode, raw)
  if not ok or type(v) ~= 'table' or #v < 2 or #v % 2 ~= 0 then return nil end
  for _, x in ipairs(v) do if type(x) ~= 'string' then return nil end end
  return v
end
local function stamp(ms) return string.format('%.0f', ms) end
local function id_ms(id) return tonumber(string.match(id, '^(%d+)')) or 0 end
local function outbox_types(K)
  return bad_type({K[1], 'stream', K[2], 'zset', K[3], 'hash', K[4], 'stream'})
end
-- a dead letter back into the outbox: its fields, a = 0, without dt
local function redrive_row(K, row)
  local names, map = fields_of(row[2])
  if not map['id'] or map['id'] == '' then return 0 end
  put(names, map, 'a', '0')
  redis.call('XADD', K[1], '*', unpack(flat_of(names, map, 'dt')))
  redis.call('XDEL', K[2], row[1])
  return 1
end
"""
)

# KEYS[1] outbox stream, KEYS[2] retry zset, KEYS[3] waiting hash,
# KEYS[4] dead-letter stream
# ARGV[1] group, ARGV[2] most retries to promote, ARGV[3] idle ms after
# which a lease may be reclaimed, ARGV[4] most entries to count, ARGV[5]
# the time retries are due by (epoch ms; '' or absent: the server's clock)
# creates the consumer group (from id 0) when missing; moves the retries
# due by then back into the stream (their fields, new stream ids); a
# waiting entry that is not a list of fields becomes a dead letter
# returns {promoted, dead-lettered, reclaimable, undelivered} (the last two
# counted up to ARGV[4]: what OUTBOX_RECLAIM and OUTBOX_READ would find)
OUTBOX_PROMOTE = (
    _PRELUDE_OUTBOX
    + r"""
local err = outbox_types(KEYS)
if err then return err end
local now = tonumber(ARGV[5] or '') or now_ms()
local promoted, buried = 0, 0
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(due) do
  local raw = redis.call('HGET', KEYS[3], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  local flat = decode_flat(raw)
  if flat then
    redis.call('XADD', KEYS[1], '*', unpack(flat))
    promoted = promoted + 1
  elseif raw then
    redis.call('XADD', KEYS[4], '*', 'id', id,
      'err', 'damaged retry entry: not a list of fields', 'dt', stamp(now), 'raw', raw)
    buried = buried + 1
  end
end
local g = ensure_group(KEYS[1], ARGV[1])
local most = tonumber(ARGV[4])
local idle = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', tonumber(ARGV[3]), '-', '+', most)
local fresh = redis.call('XRANGE', KEYS[1], '(' .. g['last-delivered-id'], '+', 'COUNT', most)
return {promoted, buried, #idle, #fresh}
"""
)

# KEYS[1] outbox stream
# ARGV[1] group, ARGV[2] consumer, ARGV[3] idle ms (the visibility
# timeout), ARGV[4] most entries to claim, ARGV[5] most XAUTOCLAIM calls
# claims for ARGV[2] entries held (by anyone) longer than ARGV[3] ms:
# XAUTOCLAIM from the oldest such entry (XPENDING IDLE), following its
# cursor for at most ARGV[5] calls
# returns {{stream id, {field, value, ...}, delivery count}, ...}
OUTBOX_RECLAIM = (
    _PRELUDE_OUTBOX
    + r"""
local err = bad_type({KEYS[1], 'stream'})
if err then return err end
if not group_info(KEYS[1], ARGV[1]) then return {} end
local idle, want = tonumber(ARGV[3]), tonumber(ARGV[4])
local first = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', idle, '-', '+', 1)
if #first == 0 then return {} end
local out, cursor = {}, first[1][1]
for _ = 1, tonumber(ARGV[5]) do
  local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], idle, cursor, 'COUNT', want - #out)
  for _, e in ipairs(r[2]) do
    -- an entry deleted while pending comes back as nil on Redis 6.2
    if type(e) == 'table' and type(e[2]) == 'table' then
      local _, n = holder(KEYS[1], ARGV[1], e[1])
      out[#out + 1] = {e[1], e[2], n}
    end
  end
  cursor = r[1]
  if cursor == '0-0' or #out >= want then break end
end
return out
"""
)

# KEYS[1] outbox stream; ARGV[1] group, ARGV[2] consumer, ARGV[3] count
# delivers to ARGV[2] entries no consumer has had yet (XREADGROUP ... >),
# creating the group (from id 0) when missing
# returns {{stream id, {field, value, ...}}, ...} (delivery count 1 each)
OUTBOX_READ = (
    _PRELUDE_OUTBOX
    + r"""
local err = bad_type({KEYS[1], 'stream'})
if err then return err end
ensure_group(KEYS[1], ARGV[1])
return read_rows(redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT',
  tonumber(ARGV[3]), 'STREAMS', KEYS[1], '>'))
"""
)

# KEYS[1] outbox stream; ARGV[1] group, ARGV[2] stream id, ARGV[3] consumer,
# ARGV[4] the lease's delivery count (0 = any)
# acknowledges and deletes the entry only while ARGV[3] still holds it with
# that delivery count
# returns 1 when done, 0 when the lease was lost (reclaimed after the
# visibility timeout, or already acknowledged)
OUTBOX_ACK = (
    _PRELUDE_OUTBOX
    + r"""
local err = bad_type({KEYS[1], 'stream'})
if err then return err end
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])) then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
"""
)

# KEYS[1] outbox stream, KEYS[2] retry zset, KEYS[3] waiting hash,
# KEYS[4] dead-letter stream
# ARGV[1] group, ARGV[2] stream id, ARGV[3] consumer, ARGV[4] the lease's
# delivery count (0 = any), ARGV[5] attempts to record ('' = keep), ARGV[6]
# error text, ARGV[7] retry at ms ('' = dead letter)
# only while ARGV[3] holds the entry: acknowledges and deletes it, then
# either puts it into the retry zset (due ARGV[7]) with its fields in the
# waiting hash, or appends it to the dead letters with dt = server ms; both
# with a = ARGV[5] and err = ARGV[6]; an entry without a delivery id cannot
# wait for a retry and becomes a dead letter
# returns 'retry' | 'dead' | 'lost'
OUTBOX_FAIL = (
    _PRELUDE_OUTBOX
    + r"""
local err = outbox_types(KEYS)
if err then return err end
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])) then return 'lost' end
local row = entry_at(KEYS[1], ARGV[2])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
if not row then return 'lost' end
redis.call('XDEL', KEYS[1], ARGV[2])
local names, map = fields_of(row)
if ARGV[5] ~= '' then put(names, map, 'a', ARGV[5]) end
put(names, map, 'err', ARGV[6])
local id = map['id']
if ARGV[7] ~= '' and id and id ~= '' then
  redis.call('ZADD', KEYS[2], tonumber(ARGV[7]), id)
  redis.call('HSET', KEYS[3], id, cjson.encode(flat_of(names, map)))
  return 'retry'
end
put(names, map, 'dt', stamp(now_ms()))
redis.call('XADD', KEYS[4], '*', unpack(flat_of(names, map)))
return 'dead'
"""
)

# KEYS[1] outbox stream; ARGV[1] group, ARGV[2] most entries
# read-only; the stream's entries oldest first, each with its consumer
# ('' = not delivered yet) and idle ms (since its last delivery, or since it
# entered the stream when not delivered yet)
# returns {{stream id, {field, value, ...}, consumer, idle ms}, ...}
OUTBOX_PENDING = (
    _PRELUDE_OUTBOX
    + r"""
local now = now_ms()
local grouped = group_info(KEYS[1], ARGV[1]) ~= nil
local out = {}
for _, row in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', tonumber(ARGV[2]))) do
  local who, idle = '', math.max(0, now - id_ms(row[1]))
  if grouped then
    local p = redis.call('XPENDING', KEYS[1], ARGV[1], row[1], row[1], 1)
    if #p > 0 then who, idle = p[1][2], p[1][3] end
  end
  out[#out + 1] = {row[1], row[2], who, idle}
end
return out
"""
)

# KEYS[1] outbox stream, KEYS[2] retry zset, KEYS[3] waiting hash,
# KEYS[4] dead-letter stream
# read-only; oldest: the emitted time (t) of the stream's first entry and
# of the next retry due, whichever is older
# returns {in the stream, waiting, dead letters, oldest emitted ms (-1 =
# none), server ms}
OUTBOX_STATS = (
    _PRELUDE_OUTBOX
    + r"""
local oldest = -1
local function seen(ms) if ms and (oldest < 0 or ms < oldest) then oldest = ms end end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first > 0 then
  local _, map = fields_of(first[1][2])
  seen(tonumber(map['t'] or '') or id_ms(first[1][1]))
end
local next_due = redis.call('ZRANGE', KEYS[2], 0, 0)
if #next_due > 0 then
  local flat = decode_flat(redis.call('HGET', KEYS[3], next_due[1]))
  if flat then
    local _, map = fields_of(flat)
    seen(tonumber(map['t'] or ''))
  end
end
return {redis.call('XLEN', KEYS[1]), redis.call('ZCARD', KEYS[2]),
  redis.call('XLEN', KEYS[4]), oldest, now_ms()}
"""
)

# KEYS[1] outbox stream, KEYS[2] dead-letter stream
# ARGV[1] the dead letter's stream id, ARGV[2] its delivery id
# moves that dead letter back into the outbox (same delivery id and fields,
# a = 0, without dt) if it still carries that delivery id
# returns 1 when moved, 0 when it is not there
OUTBOX_REDRIVE = (
    _PRELUDE_OUTBOX
    + r"""
local err = bad_type({KEYS[1], 'stream', KEYS[2], 'stream'})
if err then return err end
local row = entry_at(KEYS[2], ARGV[1])
if not row then return 0 end
local _, map = fields_of(row)
if map['id'] ~= ARGV[2] then return 0 end
return redrive_row(KEYS, {ARGV[1], row})
"""
)

# KEYS[1] outbox stream, KEYS[2] dead-letter stream
# ARGV[1] where to start ('-' or '(<stream id>'), ARGV[2] most to look at
# moves the dead letters among the next ARGV[2] back into the outbox, as
# OUTBOX_REDRIVE does; one without a delivery id stays where it is
# returns {moved, next start ('' = none left)}
OUTBOX_REDRIVE_PAGE = (
    _PRELUDE_OUTBOX
    + r"""
local err = bad_type({KEYS[1], 'stream', KEYS[2], 'stream'})
if err then return err end
local page = tonumber(ARGV[2])
local rows = redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', page)
local moved = 0
for _, row in ipairs(rows) do moved = moved + redrive_row(KEYS, row) end
if #rows < page then return {moved, ''} end
return {moved, '(' .. rows[#rows][1]}
"""
)

# KEYS[1] dead-letter stream
# ARGV[1] cutoff ms (server clock), ARGV[2] page size, ARGV[3] 1 = only
# count, ARGV[4] where to start ('-' or '(<stream id>')
# removes (or counts) the dead letters of one page whose stream id, stamped
# by the server's clock when the letter was written, is older than ARGV[1]
# returns {removed or counted, next start ('' = done)}
OUTBOX_PURGE_DEAD = (
    _PRELUDE_OUTBOX
    + r"""
local err = bad_type({KEYS[1], 'stream'})
if err then return err end
local cutoff, page = tonumber(ARGV[1]), tonumber(ARGV[2])
if cutoff < 1 then return {0, ''} end
local rows = redis.call('XRANGE', KEYS[1], ARGV[4], '(' .. stamp(cutoff) .. '-0', 'COUNT', page)
if ARGV[3] ~= '1' then
  for _, row in ipairs(rows) do redis.call('XDEL', KEYS[1], row[1]) end
end
if #rows < page then return {#rows, ''} end
return {#rows, '(' .. rows[#rows][1]}
"""
)
