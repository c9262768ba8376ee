"""Replicated durability: what ``min_replicas`` asks of commits and replays
(docs/redis.md, "Topologies").

A commit is followed by ``WAIT`` on the same connection (:class:`Replicated`)
and refused with :class:`~django_xsm.exceptions.NotDurableError` when too few
replicas acknowledged it in time. A replay (a retried commit, a done
idempotency claim) wrote nothing on its own connection, so it first writes a
small expiring key in the instance's bucket and waits for that: replication
is ordered, so every earlier write of the primary is then on the replicas.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError, NotDurableError

from .calls import Call, Cmd
from .keys import KeyLayout

__all__ = ["MAX_MIN_REPLICAS", "Durability", "Replicated"]

#: Most replicas a commit may wait for (a sanity bound, not a Redis limit).
MAX_MIN_REPLICAS = 16


@dataclass(frozen=True, slots=True)
class Replicated:
    """``request``, then ``WAIT min_replicas timeout_ms`` on the same
    connection, in one round trip (on a cluster: on the node that owns the
    request's first key). The reply is ``(request's reply, replicas that
    acknowledged)``. WAIT counts the replicas that have every write this
    connection made, so it proves ``request`` replicated (and everything
    the primary applied before it)."""

    request: Call | Cmd
    min_replicas: int
    timeout_ms: int

    @property
    def pin(self) -> str:
        """The key whose node runs the pair."""
        r = self.request
        return str(r.keys[0]) if isinstance(r, Call) else str(r.args[0])


class Durability:
    """``min_replicas`` and ``replica_timeout_ms`` of a store or inbox,
    checked once, and the two ways they are enforced."""

    __slots__ = ("min_replicas", "timeout_ms")

    def __init__(self, min_replicas: object = 0, timeout_ms: object = 100) -> None:
        if (
            isinstance(min_replicas, bool)
            or not isinstance(min_replicas, int)
            or not 0 <= min_replicas <= MAX_MIN_REPLICAS
        ):
            raise InvalidConfigError(
                f"min_replicas must be an int from 0 to {MAX_MIN_REPLICAS}, "
                f"got {brief(min_replicas)}",
                path="min_replicas",
            )
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise InvalidConfigError(
                f"replica_timeout_ms must be an int of at least 1, got {brief(timeout_ms)}",
                path="replica_timeout_ms",
                hint="WAIT 0 would block forever; 100 ms is a common budget",
            )
        self.min_replicas = min_replicas
        self.timeout_ms = timeout_ms

    def __bool__(self) -> bool:
        return self.min_replicas > 0

    def around(self, request: Any) -> Replicated:
        """``request`` followed by this policy's WAIT."""
        return Replicated(request, self.min_replicas, self.timeout_ms)

    def check(self, key: str, acknowledged: int, version: int = 0) -> None:
        """Raise NotDurableError when too few replicas acknowledged."""
        if acknowledged < self.min_replicas:
            raise NotDurableError(
                key=key, required=self.min_replicas, acknowledged=acknowledged, version=version
            )

    def confirm(
        self, layout: KeyLayout, key: str, *, version: int = 0
    ) -> Generator[Replicated, Any, None]:
        """Prove everything the primary applied so far reached the replicas
        (for a replay): a fresh write to ``key``'s bucket, then WAIT."""
        probe = Cmd("SET", (layout.bucket_health(layout.bucket(key)), "1", "PX", 10_000))
        _, acknowledged = yield self.around(probe)
        self.check(key, acknowledged, version)
