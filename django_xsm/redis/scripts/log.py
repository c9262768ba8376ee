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
