"""Scripts of the idempotency inbox: claim, mark, release, purge, forget a scope."""

from __future__ import annotations

from .preludes import PRELUDE_INBOX, PRELUDE_INDEX, PRELUDE_TYPES

__all__ = ["CLAIM", "FORGET_SCOPE", "MARK", "PURGE_INBOX", "RELEASE"]

# The opening of CLAIM and MARK: both keys type-checked, the server's time.
_PRELUDE_ROW = (
    PRELUDE_INDEX
    + PRELUDE_INBOX
    + r"""
local err = bad_type({KEYS[1], 'hash', KEYS[2], 'zset'})
if err then return err end
local now = now_ms()
"""
)

# KEYS[1] inbox hash, KEYS[2] inbox expiry
# ARGV[1] field, ARGV[2] fingerprint, ARGV[3] owner, ARGV[4] lease ms
# returns {status, receipt, retry_after_ms}; writes the lease when claimed
CLAIM = (
    _PRELUDE_ROW
    + r"""
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
    _PRELUDE_ROW
    + r"""
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
