"""Metrics of the outbox's delivery side (an ``OutboxReader``).

Every worker, whatever its loop, takes leases with ``take()`` and ends each
with ``ack()`` or ``fail()``; :func:`instrument_outbox` wraps those three
methods of one reader, :func:`instrument_class` those of every reader of
the class ``get_outbox()`` builds (``OUTBOX_CLASS``; a worker may build
its own):

- ``xsm.outbox.lag`` (ms): for each lease taken, its age since the commit
  that emitted it (``OutboxEntry.emitted_ms``, the Redis server's clock,
  against this process's clock: clock skew shifts it);
- ``xsm.outbox.deliveries`` by ``xsm.outcome``: ``delivered`` (ack
  accepted), ``retry``, ``dead`` (out of attempts), ``lost`` (the lease was
  reclaimed before its ack or fail), with ``xsm.machine`` and
  ``xsm.event`` (the emitted event's type);
- ``xsm.dead_letters`` with ``xsm.source="outbox"`` for each ``dead``.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from django_xsm.backend.build import OUTBOX_CLASS
from django_xsm.persistence.outbox import OutboxLease, OutboxReader

from . import telemetry as t
from .plugin import OtelPlugin, default_plugin

__all__ = ["instrument_class", "instrument_outbox", "uninstrument_class"]

_lock = threading.Lock()
_originals: dict[str, Any] = {}
_MARK = "_xsm_otel_instrumented"


def _lease_labels(plugin: OtelPlugin, lease: Any, outcome: str) -> dict[str, Any]:
    if not isinstance(lease, OutboxLease):
        return {t.OUTCOME: outcome}
    entry = lease.entry
    return t.labels(
        plugin.telemetry.machine(entry.machine), {t.OUTCOME: outcome, t.EVENT: entry.event_type}
    )


def _taken(plugin: OtelPlugin, leases: list[OutboxLease]) -> None:
    now_ms = int(time.time() * 1000)
    lag = plugin.telemetry.instruments.outbox_lag
    for lease in leases:
        if lease.entry.emitted_ms > 0:
            entry = lease.entry
            lag.record(
                max(0, now_ms - entry.emitted_ms),
                t.labels(plugin.telemetry.machine(entry.machine), {t.EVENT: entry.event_type}),
            )


def _ended(plugin: OtelPlugin, lease: Any, outcome: str) -> None:
    found = plugin.telemetry.instruments
    found.outbox_deliveries.add(1, _lease_labels(plugin, lease, outcome))
    if outcome == "dead":
        found.dead_letters.add(1, {t.SOURCE: "outbox"})


def _wrappers(
    plugin: OtelPlugin,
    take: Callable[..., list[OutboxLease]],
    ack: Callable[..., bool],
    fail: Callable[..., str],
) -> dict[str, Callable[..., Any]]:
    """Wrappers of ``take``, ``ack`` and ``fail`` (bound methods, or the
    class's functions: the arguments are passed through as they come)."""

    @functools.wraps(take)
    def traced_take(*args: Any, **kwargs: Any) -> list[OutboxLease]:
        leases = take(*args, **kwargs)
        _taken(plugin, leases)
        return leases

    @functools.wraps(ack)
    def traced_ack(*args: Any, **kwargs: Any) -> bool:
        acked = ack(*args, **kwargs)
        _ended(plugin, _lease_of(args, kwargs), "delivered" if acked else "lost")
        return acked

    @functools.wraps(fail)
    def traced_fail(*args: Any, **kwargs: Any) -> str:
        outcome = fail(*args, **kwargs)
        _ended(plugin, _lease_of(args, kwargs), str(outcome))
        return outcome

    return {"take": traced_take, "ack": traced_ack, "fail": traced_fail}


def _lease_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if "lease" in kwargs:
        return kwargs["lease"]
    return next((a for a in args if isinstance(a, OutboxLease)), None)


def instrument_outbox(outbox: OutboxReader, plugin: OtelPlugin | None = None) -> OutboxReader:
    """Measure ``outbox``'s deliveries (idempotent); returns it. ``plugin``:
    as for :func:`~django_xsm.contrib.otel.instrument_scanner`."""
    if getattr(outbox, _MARK, False) or _originals:
        return outbox
    wrappers = _wrappers(plugin or default_plugin(), outbox.take, outbox.ack, outbox.fail)
    for name, method in (*wrappers.items(), (_MARK, True)):
        setattr(outbox, name, method)
    return outbox


def instrument_class(plugin: OtelPlugin) -> None:
    """Measure every reader of ``OUTBOX_CLASS`` in the process."""
    with _lock:
        if _originals:
            return
        take, ack, fail = OUTBOX_CLASS.take, OUTBOX_CLASS.ack, OUTBOX_CLASS.fail
        _originals.update(take=take, ack=ack, fail=fail)
        for name, method in _wrappers(plugin, take, ack, fail).items():
            setattr(OUTBOX_CLASS, name, method)


def uninstrument_class() -> None:
    """Undo :func:`instrument_class`."""
    with _lock:
        for name, original in _originals.items():
            setattr(OUTBOX_CLASS, name, original)
        _originals.clear()
