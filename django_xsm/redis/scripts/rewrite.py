"""Scripts that rewrite stored values in place, only where they are still
what the caller read (``xsm_reencrypt``: a concurrent commit is never
lost; a value that changed is left for the next run)."""

from __future__ import annotations

__all__ = ["HASH_CAS", "STREAM_REWRITE"]

# KEYS[1] a hash
# ARGV triples: field, expected value, new value
# writes every new value only when every field still holds its expected one
# returns 1 when written, 0 when a value changed since it was read (or the
# key is not a hash any more): nothing written
HASH_CAS = r"""
local unpack = unpack or table.unpack
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return 0 end
local args = {}
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1] then return 0 end
  args[#args + 1] = ARGV[i]; args[#args + 1] = ARGV[i + 2]
end
if #args > 0 then redis.call('HSET', KEYS[1], unpack(args)) end
return 1
"""

# KEYS[1] a stream
# ARGV[1] 'rebuild' or 'tail', ARGV[2] the consumer group (tail; '' for
# rebuild), then quadruples: entry id, field, expected value, new value
# rebuild (a stream without consumer groups: a transition log, the dead
#   letters): the whole stream is written again with the same ids, fields,
#   last generated id and expiry, the listed values replaced
# tail (the outbox): the entries the group was not handed yet, from the
#   first listed one on, move in order to the end of the stream (new ids,
#   still undelivered) with the listed values replaced; listed entries the
#   group holds (delivered, pending) are left alone
# returns {values replaced, changed 0/1, listed entries left alone}
#   changed 1: a listed entry or value is not what the caller read; nothing
#   written
STREAM_REWRITE = r"""
local unpack = unpack or table.unpack
if redis.call('TYPE', KEYS[1])['ok'] ~= 'stream' then return {0, 1, 0} end
local want, fields_of, listed = {}, {}, 0
for i = 3, #ARGV, 4 do
  local id = ARGV[i]
  if not want[id] then want[id] = {}; fields_of[id] = 0; listed = listed + 1 end
  want[id][ARGV[i + 1]] = {ARGV[i + 2], ARGV[i + 3]}
  fields_of[id] = fields_of[id] + 1
end
-- a row's fields with the listed values replaced (nil: one differs or is gone)
local function replaced(row)
  local w = want[row[1]]
  if not w then return row[2], 0 end
  local out, hit = {}, 0
  for i = 1, #row[2], 2 do
    local name, v = row[2][i], row[2][i + 1]
    local x = w[name]
    if x then
      if v ~= x[1] then return nil, 0 end
      v = x[2]; hit = hit + 1
    end
    out[#out + 1] = name; out[#out + 1] = v
  end
  if hit ~= fields_of[row[1]] then return nil, 0 end
  return out, hit
end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if ARGV[1] == 'rebuild' then
  if #groups > 0 then
    return redis.error_reply('ERR STREAM_REWRITE cannot rebuild a stream with consumer groups')
  end
  local rows = redis.call('XRANGE', KEYS[1], '-', '+')
  local out, found, total = {}, 0, 0
  for _, row in ipairs(rows) do
    local flat, hit = replaced(row)
    if not flat then return {0, 1, 0} end
    if want[row[1]] then found = found + 1 end
    total = total + hit
    out[#out + 1] = {row[1], flat}
  end
  if found ~= listed then return {0, 1, 0} end
  if total == 0 then return {0, 0, 0} end
  local last = nil
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1] end
  end
  local pttl = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  for _, r in ipairs(out) do redis.call('XADD', KEYS[1], r[1], unpack(r[2])) end
  if last and last ~= out[#out][1] then
    -- the newest entries were deleted: the stream still remembers the id
    redis.call('XADD', KEYS[1], last, 'x', '')
    redis.call('XDEL', KEYS[1], last)
  end
  if pttl > 0 then redis.call('PEXPIRE', KEYS[1], pttl) end
  return {total, 0, 0}
end
local last = '0-0'
for _, g in ipairs(groups) do
  local f = {}
  for i = 1, #g - 1, 2 do f[g[i]] = g[i + 1] end
  if f['name'] == ARGV[2] then last = f['last-delivered-id'] end
end
local rows = redis.call('XRANGE', KEYS[1], '(' .. last, '+')
local start, seen = nil, 0
for i, row in ipairs(rows) do
  if want[row[1]] then
    seen = seen + 1
    if not start then start = i end
  end
end
local held = listed - seen
if not start then return {0, 0, held} end
local out, total = {}, 0
for i = start, #rows do
  local flat, hit = replaced(rows[i])
  if not flat then return {0, 1, held} end
  total = total + hit
  out[#out + 1] = {rows[i][1], flat}
end
for _, r in ipairs(out) do
  redis.call('XDEL', KEYS[1], r[1])
  redis.call('XADD', KEYS[1], '*', unpack(r[2]))
end
return {total, 0, held}
"""
