"""Scripts of the transition log (one stream per instance)."""

from __future__ import annotations

from .preludes import PRELUDE_LOG, PRELUDE_TYPES

__all__ = ["LOG_APPEND", "LOG_PURGE"]

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
# ARGV[2] cutoff ms, ARGV[3] page size, ARGV[4] where to start ('-' or
# '(<id>' after the previous page), ARGV[5] the oldest kept timestamp of the
# previous pages ('' = none)
# removes the records older than the cutoff in one page, wherever they are
# (records written under skewed clocks may sit behind newer ones); after the
# last page, re-indexes the stream by its oldest kept record (or drops it
# from the index when nothing is left)
# returns {removed, more 0/1, next start, oldest kept so far ('' = none)}
LOG_PURGE = (
    PRELUDE_TYPES
    + r"""
local err = bad_type({KEYS[1], 'stream', KEYS[2], 'zset'})
if err then return err end
local page = tonumber(ARGV[3])
local rows = redis.call('XRANGE', KEYS[1], ARGV[4], '+', 'COUNT', page)
local cutoff = tonumber(ARGV[2])
local oldest = tonumber(ARGV[5])
local removed = 0
for _, row in ipairs(rows) do
  local ts = 0
  for i = 1, #row[2], 2 do if row[2][i] == 'ts' then ts = tonumber(row[2][i + 1]) or 0 end end
  if ts < cutoff then
    redis.call('XDEL', KEYS[1], row[1])
    removed = removed + 1
  elseif not oldest or ts < oldest then
    oldest = ts
  end
end
if #rows == page then
  return {removed, 1, '(' .. rows[#rows][1], oldest and string.format('%.0f', oldest) or ''}
end
if oldest then redis.call('ZADD', KEYS[2], oldest, ARGV[1])
else redis.call('ZREM', KEYS[2], ARGV[1]) end
return {removed, 0, '', ''}
"""
)
