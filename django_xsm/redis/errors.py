"""Translate redis-py exceptions into django-xsm errors.

The translated message names the exception class, never its text: redis-py
puts ``host:port`` into connection errors, and these messages reach HTTP
responses and health checks. The original stays chained for tracebacks. An
outage is logged once, not once per failed call (:class:`Outages`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator

import redis.exceptions as rex

from django_xsm.exceptions import (
    InvalidConfigError,
    SnapshotCorruptError,
    StoreAuthenticationError,
    StoreError,
    StoreUnavailableError,
)

__all__ = [
    "AUTH_REPLIES",
    "UNAVAILABLE_REPLIES",
    "Outages",
    "auth_reason",
    "cluster_reply",
    "outages",
    "translate_errors",
    "unavailable_reason",
]

logger = logging.getLogger("django_xsm.redis")

#: Error replies that mean "these credentials or permissions are wrong":
#: no retry fixes them.
AUTH_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM")

#: Error replies that mean "the server cannot take this right now".
UNAVAILABLE_REPLIES = (
    "LOADING",
    "READONLY",
    "MASTERDOWN",
    "OOM",
    "BUSY",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "NOREPLICAS",
    "MISCONF",
)

# redis-py turns some replies into their own classes and strips the code.
_UNAVAILABLE_CLASSES: tuple[type[BaseException], ...] = (
    rex.BusyLoadingError,
    rex.ReadOnlyError,
    rex.OutOfMemoryError,
    rex.ClusterDownError,
    rex.TryAgainError,
    rex.MasterDownError,
    rex.ClusterError,  # redirections exhausted
    rex.SlotNotCoveredError,
)


# Redis 6.2 wraps an error reply met inside a script (a redis.call() that
# failed) in its own: "Error running script (call to f_<sha>): @user_script:12:
# @user_script: 12: -OOM command not allowed ...". Redis 7 passes the reply on
# as it is ("OOM command not allowed ..."), which redis-py then maps to its class.
_SCRIPT_ERROR = re.compile(
    r"Error running script \(call to f_[0-9a-f]+\): @user_script:\d+: "
    r"(?:@user_script: \d+: )?-?(\S+)"
)


def _reply_code(exc: BaseException) -> str:
    """The error reply's code (``OOM``, ``READONLY``, ...), unwrapped from a
    Redis 6.2 script error."""
    text = str(exc)
    wrapped = _SCRIPT_ERROR.match(text)
    if wrapped is not None:
        return wrapped.group(1).upper()
    return text.split(" ", 1)[0].upper()


def auth_reason(exc: BaseException) -> str | None:
    """The reason ``exc`` means bad credentials or a missing ACL permission
    (a reply or class name), else None."""
    # redis-py's AuthenticationError is a ConnectionError: test it first.
    head = _reply_code(exc)
    if isinstance(exc, rex.ResponseError | rex.ConnectionError) and head in AUTH_REPLIES:
        return head
    if isinstance(exc, rex.AuthenticationError | rex.NoPermissionError):
        return type(exc).__name__
    return None


def unavailable_reason(exc: BaseException) -> str | None:
    """The reason ``exc`` means unavailable (a class or reply name), else None."""
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError, *_UNAVAILABLE_CLASSES)):
        return type(exc).__name__
    if isinstance(exc, rex.ResponseError):
        head = _reply_code(exc)
        if head in UNAVAILABLE_REPLIES:
            return head
    return None


#: Replies a cluster node gives a client that does not speak cluster.
_CLUSTER_REPLIES = ("MOVED", "ASK", "CROSSSLOT")


def cluster_reply(exc: BaseException) -> str | None:
    """``MOVED``/``ASK``/``CROSSSLOT`` when ``exc`` is a cluster redirection
    or slot refusal, else None."""
    if isinstance(exc, rex.AskError):  # MovedError is an AskError
        return "MOVED" if isinstance(exc, rex.MovedError) else "ASK"
    if isinstance(exc, rex.ResponseError):
        head = _reply_code(exc)
        if head in _CLUSTER_REPLIES:
            return head
    return None


class Outages:
    """This process's view of whether Redis answers, for one log line per
    outage: :meth:`failed` on every call that failed as unavailable (the
    first one after a success logs a WARNING naming the cause), and
    :meth:`answered` on every call Redis answered (the first one after an
    outage logs an INFO with its length). Thread-safe; a call that finds
    Redis answering costs one attribute read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.down_since: float | None = None  # time.monotonic() of the first failure
        self.failures = 0

    def failed(self, reason: str) -> None:
        with self._lock:
            self.failures += 1
            if self.down_since is not None:
                return
            self.down_since = time.monotonic()
        logger.warning(
            "Redis is unavailable (%s): django-xsm calls fail with StoreUnavailableError "
            "(HTTP 503) until it answers again (logged once per outage)",
            reason,
        )

    def answered(self) -> None:
        if self.down_since is None:
            return
        with self._lock:
            since, failures = self.down_since, self.failures
            if since is None:
                return
            self.down_since, self.failures = None, 0
        logger.info(
            "Redis answers again after %.1f s unavailable (%d failed call(s))",
            time.monotonic() - since,
            failures,
        )


#: The process's outage log (every driver reports to it).
outages = Outages()


def _unavailable(message: str, key: str | None, reason: str) -> StoreUnavailableError:
    outages.failed(reason)
    return StoreUnavailableError(message, key=key, cause=reason)


@contextlib.contextmanager
def translate_errors(key: str | None = None, *, cluster: bool = False) -> Iterator[None]:
    """Re-raise redis-py errors as StoreUnavailableError / SnapshotCorruptError
    / StoreError; a cluster reply to a non-cluster client (``cluster``
    False) as InvalidConfigError. Unavailability and the first answer after
    it are reported to :data:`outages`."""
    try:
        yield
    except rex.RedisClusterException as exc:
        # Not a RedisError: redis-py's cluster client raises it for a slot no
        # node covers (unavailable) or a request it cannot route.
        reason = unavailable_reason(exc)
        if reason is not None:
            raise _unavailable(f"Redis Cluster is unavailable ({reason})", key, reason) from exc
        raise StoreError(
            f"Redis Cluster refused the request ({type(exc).__name__})",
            key=key,
            hint="see the chained exception",
        ) from exc
    except rex.RedisError as exc:
        redirected = cluster_reply(exc)
        if redirected is not None and not cluster:
            raise InvalidConfigError(
                f"This Redis is a cluster node: it answered {redirected}",
                path="client_or_url",
                hint="use a cluster client (redis.cluster.RedisCluster, or in Django "
                "set XSM['REDIS_CLUSTER'] = True)",
            ) from exc
        if redirected is not None:
            # redis-py follows redirections itself; one that still escapes
            # means slots are moving right now: retry shortly.
            raise _unavailable(
                f"Redis Cluster is moving this key's slot ({redirected})", key, redirected
            ) from exc
        denied = auth_reason(exc)
        if denied is not None:
            raise StoreAuthenticationError(
                f"Redis refused the credentials or permissions ({denied})",
                key=key,
                cause=denied,
            ) from exc
        reason = unavailable_reason(exc)
        if reason is not None:
            raise _unavailable(f"Redis is unavailable ({reason})", key, reason) from exc
        text = str(exc)
        if "WRONGTYPE" in text:
            raise SnapshotCorruptError(
                "A key of this instance holds the wrong Redis type (WRONGTYPE)",
                key=key,
                hint="something else wrote into the namespace; check the prefix "
                "is not shared with other data",
            ) from exc
        head = text.split(" ", 1)[0]
        old_server = "unknown command" in text.lower() or "unknown subcommand" in text.lower()
        raise StoreError(
            f"Redis refused the command ({type(exc).__name__}: {head})",
            key=key,
            hint="this Redis is too old: the scripts need Redis >= 6.2"
            if old_server
            else "see the chained exception",
        ) from exc
    else:
        outages.answered()
