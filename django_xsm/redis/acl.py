"""The Redis commands django-xsm sends, for a least-privilege ACL user
(docs/security.md): every command its Lua scripts call (scripts run with
the caller's permissions) and every one its clients send."""

from __future__ import annotations

from .keys import KeyLayout

__all__ = ["COMMANDS", "acl_setuser"]

#: Sorted; tests/django/outbox/test_acl.py checks the scripts call no other
#: and runs the main paths as a user allowed exactly these.
COMMANDS = (
    # scripts and their loading
    "eval", "evalsha",
    # keys, strings, lists
    "del", "exists", "get", "set", "type", "persist", "pexpire", "pttl", "scan", "time",
    "lpush", "ltrim", "blpop",
    # hashes
    "hdel", "hexists", "hget", "hgetall", "hkeys", "hmget", "hset", "hsetnx", "hstrlen",
    # sorted sets
    "zadd", "zcard", "zcount", "zrange", "zrangebylex", "zrangebyscore", "zrem", "zscan",
    "zscore",
    # streams
    "xack", "xadd", "xautoclaim", "xdel", "xgroup", "xinfo", "xlen", "xpending", "xrange",
    "xread", "xreadgroup", "xrevrange",
    # DURABILITY (min_replicas > 0), health and cluster checks
    "wait", "ping", "info",
)  # fmt: skip


def acl_setuser(user: str, password: str, prefix: str, *, select: bool = False) -> list[str]:
    """The ``ACL SETUSER`` arguments of a user that may run django-xsm on
    namespace ``prefix`` and nothing else (``select``: also ``SELECT``, for a
    URL naming a database number other than 0)."""
    tag = KeyLayout.schema_key_for(prefix).removesuffix(":schema")  # "{prefix}"
    extra = ["+select"] if select else []
    return [
        user,
        "reset",
        "on",
        f">{password}",
        f"~{tag}*",
        f"~{tag[:-1]}:*",
        "resetchannels",
        "-@all",
        *(f"+{c}" for c in COMMANDS),
        *extra,
    ]
