"""Transition signals and structured transition logging, as one plugin
(docs/django.md, Signals and Transition log lines).

:class:`TransitionPlugin` is part of every block the Django layer opens.
It names machines through ``name_of`` (machine id -> registered name) and
never imports the registry. ``pre_transition`` goes out before the engine
runs an event; after the durable commit, one INFO line per accepted event
on the ``django_xsm.transitions`` logger, ``post_commit`` (inside the
caller's database transaction) and ``post_transition`` once that
transaction commits. An event the state did not take (``send()`` without
``strict``) is logged right away with ``accepted: false``. Each line's
fields are in ``record.xsm``; :class:`JsonFormatter` prints them as JSON.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, transaction

from django_xsm.persistence import Plugin
from django_xsm.persistence.block import PersistedInstance
from django_xsm.persistence.records import CommitResult
from django_xsm.signals import post_commit, post_transition, pre_transition

__all__ = ["JsonFormatter", "TransitionPlugin", "log_refused"]

logger = logging.getLogger("django_xsm.transitions")


@dataclass(slots=True)
class _Pending:
    event: str
    payload: dict[str, Any]
    from_state: Any
    to_state: Any = None


#: An async block's ``post_commit`` and ``post_transition`` keyword arguments.
_Signals = tuple[dict[str, Any], list[dict[str, Any]]]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _fields(
    machine: str,
    block: PersistedInstance,
    item: _Pending,
    *,
    accepted: bool,
    version: int,
    seq: int,
) -> dict[str, Any]:
    return {
        "machine": machine,
        "key": block.key,
        "event": item.event,
        "from": item.from_state,
        "to": item.to_state,
        "accepted": accepted,
        "version": version,
        "seq": seq,
        "actor": block.actor,
        "correlation_id": block.correlation_id,
    }


def _log(fields: Mapping[str, Any]) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return  # nothing to format
    machine, key = fields["machine"], fields["key"]
    event, version = fields["event"], fields["version"]
    if fields["accepted"]:
        message = "%s %s: %s -> %s on %s (v%d)"
        args = (machine, key, _text(fields["from"]), _text(fields["to"]), event, version)
    else:
        guards = fields.get("guards") or ()
        why = f"guard {', '.join(guards)} said no" if guards else fields.get("reason", "")
        message = "%s %s: %s not accepted in %s (v%d)%s"
        args = (machine, key, event, _text(fields["from"]), version, f": {why}" if why else "")
    logger.info(message, *args, extra={"xsm": dict(fields)})


def log_refused(
    *,
    machine: str,
    key: str,
    event: str,
    state: Any,
    version: int,
    actor: str,
    correlation_id: str,
    reason: str = "",
    guards: tuple[str, ...] = (),
) -> None:
    """The log line of a strict send that was refused (nothing committed);
    ``reason``/``guards`` say why (see ``EventNotAcceptedError``)."""
    _log(
        {
            "reason": reason,
            "guards": list(guards),
            "machine": machine,
            "key": key,
            "event": event,
            "from": state,
            "to": state,
            "accepted": False,
            "version": version,
            "seq": 0,
            "actor": actor,
            "correlation_id": correlation_id,
        }
    )


class TransitionPlugin(Plugin):
    """Signals and log lines for every block (see the module docstring).

    ``name_of(machine_id)`` gives a machine's registered name (else its id
    is used). One instance serves many blocks at once: per-block state is
    kept in weak dictionaries keyed by the block, so an aborted block
    leaves nothing behind. ``database``: the one whose transaction
    ``post_transition`` waits for.
    """

    def __init__(
        self, name_of: Callable[[str], str | None], *, database: str = DEFAULT_DB_ALIAS
    ) -> None:
        self._name_of = name_of
        self.database = database
        self._lock = threading.Lock()
        self._current: weakref.WeakKeyDictionary[PersistedInstance, _Pending] = (
            weakref.WeakKeyDictionary()
        )
        self._accepted: weakref.WeakKeyDictionary[PersistedInstance, list[_Pending]] = (
            weakref.WeakKeyDictionary()
        )
        # an async block's post_commit and post_transition keyword arguments
        self._deferred: weakref.WeakKeyDictionary[PersistedInstance, _Signals] = (
            weakref.WeakKeyDictionary()
        )

    def using(self, database: str) -> TransitionPlugin:
        """This plugin for blocks whose ``post_transition`` waits for the
        transaction of ``database`` (a model row's blocks: the row's)."""
        if database == self.database:
            return self
        return TransitionPlugin(self._name_of, database=database)

    def machine_name(self, block: PersistedInstance) -> str:
        """The registered name of the block's machine (its id if unregistered)."""
        machine_id = str(getattr(block.machine, "id", ""))
        return self._name_of(machine_id) or machine_id

    def before_send(
        self, block: PersistedInstance, event_type: str, payload: Mapping[str, Any]
    ) -> None:
        state = block.value
        name = self.machine_name(block)
        with self._lock:
            self._current[block] = _Pending(event_type, dict(payload), state)
        pre_transition.send(
            sender=name,
            machine=name,
            key=block.key,
            event=event_type,
            payload=dict(payload),
            state=state,
            actor=block.actor,
            correlation_id=block.correlation_id,
            instance=block,
        )

    def after_send(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        with self._lock:
            item = self._current.pop(block, None)
        if item is None:
            return
        item.to_state = receipt.value
        if receipt.accepted:
            with self._lock:
                self._accepted.setdefault(block, []).append(item)
        else:
            name = self.machine_name(block)
            fields = _fields(name, block, item, accepted=False, version=block.version, seq=0)
            reason, guards = block.instance.refusal(event_type)
            _log({**fields, "reason": reason, "guards": list(guards)})

    def after_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        with self._lock:
            items = self._accepted.pop(block, [])
        is_async = block.is_async
        name = self.machine_name(block)
        committed = {
            "machine": name,
            "key": block.key,
            "value": block.value,
            "state_ids": tuple(block.state_ids),
            "version": result.version,
        }
        transitions: list[dict[str, Any]] = []
        if is_async:
            with self._lock:
                self._deferred[block] = (committed, transitions)
        else:
            # Now, inside the caller's database transaction (if any): a
            # user's projection moves, or rolls back, with it.
            post_commit.send_robust(sender=name, **committed)
        for index, item in enumerate(items):
            seq = result.first_seq + index if result.first_seq else 0
            fields = _fields(name, block, item, accepted=True, version=result.version, seq=seq)
            _log(fields)
            kwargs = {
                "machine": fields["machine"],
                "key": block.key,
                "event": item.event,
                "payload": item.payload,
                "from_state": item.from_state,
                "to_state": item.to_state,
                "version": result.version,
                "seq": seq,
                "actor": block.actor,
                "correlation_id": block.correlation_id,
            }
            if is_async:
                # Sync receivers must not block the event loop: the async
                # driver awaits asend_robust() after the block (aafter_commit).
                transitions.append(kwargs)
            elif post_transition.has_listeners(name):
                # send_robust: the change is durable, a failing receiver must
                # not turn it into an error response. on_commit: receivers
                # must not act on a state a rolled-back transaction discards.
                _when_committed(
                    functools.partial(post_transition.send_robust, fields["machine"], **kwargs),
                    self.database,
                )

    async def aafter_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        """``apersisted()`` awaits this after the commit: every async block
        opened with these plugins (the manager's, a view's, or your own
        ``apersisted(store, key, machine, plugins=backend.plugins)``) sends
        its signals the same way."""
        with self._lock:
            committed, transitions = self._deferred.pop(block, (None, []))
        if committed is not None:
            await post_commit.asend_robust(sender=committed["machine"], **committed)
        for kwargs in transitions:
            await post_transition.asend_robust(sender=kwargs["machine"], **kwargs)


def _when_committed(send: Any, using: str) -> None:
    """Run ``send`` once the open transaction of ``using`` commits, or now
    when none is open. Outside a transaction the connection is not touched
    (an app without a database, or code where database access is not
    allowed, still gets its signals)."""
    if transaction.get_connection(using).in_atomic_block:
        transaction.on_commit(send, using=using)
    else:
        send()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and, for
    transition lines, every field of ``record.xsm``.

    ``LOGGING = {"formatters": {"json": {"()": "django_xsm.backend.transitions.JsonFormatter"}}}``
    """

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": _dt.datetime.fromtimestamp(record.created, tz=_dt.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "xsm", None)
        if isinstance(extra, Mapping):
            data.update(extra)
        if record.exc_info:
            data["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)
