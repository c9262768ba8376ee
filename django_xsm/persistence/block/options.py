"""The options of one persisted block and of one ``send()``, checked once:
``persisted(...)`` builds a :class:`BlockOptions` and nothing below it
spells the options again. Audit metadata (actor, reason, correlation id)
is checked here, before any I/O: a value the log cannot hold must never
reach the commit that stores it next to the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django_xsm.exceptions import ArgumentTypeError
from django_xsm.persistence.locks import LockStrategy, OptimisticLock
from django_xsm.persistence.payloads import validate_max_payload_bytes
from django_xsm.persistence.records import require_text

__all__ = ["BlockOptions", "SendOptions"]

_NO_ACTOR_HINT = "pass the user name or id as a str, or '' for none"


@dataclass(frozen=True, slots=True)
class BlockOptions:
    """What ``persisted(store, key, machine, **options)`` was asked for.

    ``plugins``: IdempotencyPlugin, AuditPlugin and Plugin hooks.
    ``lock``: the lock strategy (optimistic by default). ``create=False``:
    a missing key raises ``InstanceNotFoundError``. ``strict``: every send
    raises ``EventNotAcceptedError`` when no transition is taken.
    ``actor`` / ``correlation_id``: defaults of the sends' log records.
    ``idempotency_key`` (with ``fingerprint`` and ``principal``): a key
    claimed for the whole block at open. ``context``: the initial context
    of a new instance. ``clock``: epoch milliseconds (default: the
    store's clock, else the wall clock). ``max_payload_bytes``: refuse
    every send whose payload is larger, as compact JSON
    (``PayloadTooLargeError``, before the send's I/O; see
    :mod:`django_xsm.persistence.payloads`); None: no limit.
    """

    plugins: tuple[Any, ...] = ()
    lock: LockStrategy = field(default_factory=OptimisticLock)
    create: bool = True
    strict: bool = False
    actor: str = ""
    correlation_id: str = ""
    idempotency_key: str | None = None
    fingerprint: str = ""
    principal: str = ""
    context: Mapping[str, Any] | None = None
    clock: Callable[[], int] | None = None
    max_payload_bytes: int | None = None

    def __post_init__(self) -> None:
        require_text(self.actor, "actor", hint=_NO_ACTOR_HINT)
        validate_max_payload_bytes(self.max_payload_bytes)
        require_text(self.correlation_id, "correlation_id")
        if self.context is not None and not isinstance(self.context, Mapping):
            raise ArgumentTypeError(
                "context", self.context, expected="a dict or None", hint="the new instance's data"
            )
        if not isinstance(self.lock, LockStrategy):
            raise ArgumentTypeError(
                "lock",
                self.lock,
                expected="OptimisticLock(), PessimisticLock(...) or AdaptiveLock(...)",
            )


@dataclass(frozen=True, slots=True)
class SendOptions:
    """The options of one ``send()``; ``None`` means "the block's value"."""

    idempotency_key: str | None = None
    actor: str | None = None
    reason: str = ""
    correlation_id: str | None = None
    strict: bool | None = None

    def __post_init__(self) -> None:
        # Before the send's claim round trip and before the engine runs.
        if self.actor is not None:
            require_text(self.actor, "actor", hint=_NO_ACTOR_HINT)
        require_text(self.reason, "reason")
        if self.correlation_id is not None:
            require_text(self.correlation_id, "correlation_id")
