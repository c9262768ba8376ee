"""The store's listing, timer, dead-letter and health operations, as
generators (the part of :class:`~django_xsm.redis.core.StoreCore` that
reads across buckets or keeps timer bookkeeping)."""

from __future__ import annotations

import heapq
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis.exceptions as rex

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence import records
from django_xsm.persistence.arguments import validate_key, validate_limit, validate_text
from django_xsm.persistence.base import Codec

from . import calls
from .calls import Call, Cmd, b2s
from .keys import LAYOUT_VERSION, SEP, KeyLayout
from .namespace import LayoutState, config_value
from .requests import Many, Op

__all__ = ["StoreQueries"]

logger = logging.getLogger("django_xsm.timers")


def _due_ms(score: Any) -> int | None:
    """A due-index score as epoch ms, or None for one that is no time
    (inf, NaN, or too large to be an exact millisecond)."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        return None
    if not -_MAX_MS <= value <= _MAX_MS:  # also false for NaN
        return None
    return int(value)


_MAX_MS = float(2**53)


class StoreQueries:
    """Mixed into ``StoreCore``: what lists keys, scans deadlines, parks
    and checks health."""

    state: LayoutState
    codec: Codec
    max_snapshot_bytes: int
    per_bucket_health: bool

    def list_page(
        self, prefix: str, after: str, limit: int, machine: str | None, state: str | None
    ) -> Op[tuple[list[str], str]]:
        # StoreKeywords.list_page checked the arguments.
        layout = yield from self.state.ensure()
        if state is not None:
            index, head = 4, state + SEP
        elif machine is not None:
            index, head = 3, machine + SEP
        else:
            index, head = 2, ""
        base = (head + prefix).encode()
        if after and after >= prefix:
            lo = b"(" + (head + after).encode()
        else:
            lo = b"[" + base
        hi = b"[" + base + b"\xff"
        both = "1" if state is not None and machine is not None else "0"
        replies = yield _per_bucket(
            layout,
            "LIST_PAGE",
            lambda b: [
                index,
                lo,
                hi,
                limit + 1,  # one more than a page: is there a next page?
                len(head.encode()),
                layout.snapshot_prefix(b),
                layout.log_prefix(b),
                both,
                machine or "",
            ],
        )
        # a state filter's page comes in two sorted runs (see LIST_PAGE)
        pages = [sorted({b2s(k) for k in r}) for r in replies]
        merged = list(heapq.merge(*pages))
        page = merged[:limit]
        # Each bucket gave up to limit + 1 of its keys after the cursor, so more
        # than `limit` keys remain exactly when more than `limit` came back.
        more = len(merged) > limit
        return page, (page[-1] if more else "")

    def due_keys(self, until: int, limit: int, prefix: str) -> Op[list[tuple[str, int]]]:
        # StoreKeywords.due_keys checked the arguments.
        layout = yield from self.state.ensure()
        replies = yield _per_bucket(
            layout,
            "DUE",
            lambda b: [until, limit, layout.snapshot_prefix(b), layout.log_prefix(b), prefix],
        )
        rows: list[tuple[int, str]] = []
        for reply in replies:
            for i in range(0, len(reply), 2):
                key, due = b2s(reply[i]), _due_ms(reply[i + 1])
                if due is None:
                    yield from self._park_damaged_due(key, b2s(reply[i + 1]))
                else:
                    rows.append((due, key))
        rows.sort()
        return [(k, d) for d, k in rows[:limit]]

    def _park_damaged_due(self, key: str, score: str) -> Op[None]:
        """A due-index entry whose score is no time (``-inf``, written by
        something else): every scan would read it first and fail on it.
        Parked with the reason instead (out of the due index, listed by
        ``dead_letters()``), so scans go on; any commit of the instance
        indexes it again."""
        reason = f"due index entry scored {score[:40]}, not a time: the index was damaged"
        parked = yield from self.park(key, reason)
        logger.warning(
            "xsm timer scan skipped %r: its due-index entry is scored %s, not a time; "
            "%s. Any commit of the instance (an event, or the admin's 'Fire timers now') "
            "indexes it again; 'manage.py xsm_forget' erases it",
            key,
            score[:40],
            "parked it (dead letters)" if parked else "its record is gone",
        )

    def record_timer_failure(
        self,
        key: str,
        expected_version: int,
        failures: Mapping[str, records.TimerFailure],
        next_due_ms: int | None,
    ) -> Op[bool]:
        validate_key(key)
        layout = yield from self.state.ensure()
        b = layout.bucket(key)
        payload = calls._dumps({k: f.to_dict() for k, f in failures.items()}) if failures else ""
        reply = yield Call(
            "RECORD_TIMER_FAILURE",
            [layout.snapshot(key), layout.due(b), layout.dead(b)],
            [
                key,
                expected_version,
                payload,
                "" if next_due_ms is None else next_due_ms,
                "1" if any(f.dead for f in failures.values()) else "0",
            ],
        )
        return bool(int(reply))

    def dead_letters(self, limit: int) -> Op[list[tuple[str, int]]]:
        validate_limit(limit)
        layout = yield from self.state.ensure()
        cmds = tuple(
            Cmd("ZRANGE", (layout.dead(b), 0, limit - 1, "WITHSCORES"))
            for b in range(layout.buckets)
        )
        replies = yield Many(cmds)
        rows = sorted((int(float(s)), b2s(m)) for r in replies for m, s in calls.score_pairs(r))
        return [(k, t) for t, k in rows[:limit]]

    def park(self, key: str, reason: str) -> Op[bool]:
        validate_key(key)
        validate_text(reason, "reason")
        layout = yield from self.state.ensure()
        b = layout.bucket(key)
        reply = yield Call(
            "PARK", [layout.snapshot(key), layout.due(b), layout.dead(b)], [key, reason[:500]]
        )
        return bool(int(reply))

    def dead_letter_reasons(self, keys: Sequence[str]) -> Op[dict[str, str]]:
        wanted = _wanted_keys(keys)
        if not wanted:
            return {}
        layout = yield from self.state.ensure()
        rows = yield Many(tuple(Cmd("HMGET", (layout.snapshot(k), "park", "tf")) for k in wanted))
        return {k: _reason(park, tf) for k, (park, tf) in zip(wanted, rows, strict=True)}

    def persists_data(self) -> Op[bool | None]:
        try:
            aof = yield Cmd("CONFIG GET", ("appendonly",))
            save = yield Cmd("CONFIG GET", ("save",))
        except rex.ResponseError:  # CONFIG renamed away or not allowed by the ACL
            return None
        return config_value(aof, "appendonly") == "yes" or bool(config_value(save, "save"))

    def machine_ids(self, keys: Sequence[str]) -> Op[dict[str, str]]:
        wanted = _wanted_keys(keys)
        if not wanted:
            return {}
        layout = yield from self.state.ensure()
        raw = yield Many(tuple(Cmd("HGET", (layout.snapshot(k), "m")) for k in wanted))
        found = {k: b2s(r) for k, r in zip(wanted, raw, strict=True)}
        # A record committed with an empty machine id names it in its snapshot.
        blank = [k for k, r in zip(wanted, raw, strict=True) if r is not None and not b2s(r)]
        if blank:
            rows = yield Many(tuple(Cmd("HGETALL", (layout.snapshot(k),)) for k in blank))
            for k, fields in zip(blank, rows, strict=True):
                record = calls.parse_record(k, fields, self.codec, self.max_snapshot_bytes)
                if record is not None:
                    found[k] = record.owner
        return found

    def prune_expired(self, limit: int) -> Op[int]:
        validate_limit(limit)
        layout = yield from self.state.ensure()
        replies = yield _per_bucket(
            layout,
            "PRUNE_EXPIRED",
            lambda b: [limit, layout.snapshot_prefix(b), layout.log_prefix(b)],
        )
        return sum(int(r) for r in replies)

    def health(self) -> Op[dict[str, Any]]:
        # The schema marker is read on every check: a marker recreated with
        # another namespace id means Redis lost the namespace (reported as
        # namespace_reset). A small expiring write rather than PING: a
        # read-only replica (READONLY) or a full server (OOM) still answers
        # PING but cannot take a commit, and readiness must say so.
        write = Cmd("SET", (KeyLayout.health_key_for(self.state.prefix), "1", "PX", 10_000))
        schema, _ = yield Many((self.state.schema_call(), write))
        layout = self.state.seen(schema)
        if self.per_bucket_health:
            # Each bucket is one hash slot: a write to each proves that every
            # slot owner holding this namespace is reachable and writable.
            yield Many(
                tuple(
                    Cmd("SET", (layout.bucket_health(b), "1", "PX", 10_000))
                    for b in range(layout.buckets)
                )
            )
        info: dict[str, Any] = {
            "ok": True,
            "backend": "redis",
            "layout": LAYOUT_VERSION,
            "buckets": layout.buckets,
        }
        if self.state.reset:
            info["namespace_reset"] = True
        return info


def _per_bucket(layout: KeyLayout, script: str, args: Callable[[int], list[Any]]) -> Many:
    """``script`` on each bucket's prune keys with ``args(bucket)``, in one pipeline."""
    return Many(tuple(Call(script, layout.prune_keys(b), args(b)) for b in range(layout.buckets)))


def _reason(park: Any, tf: Any) -> str:
    """Why a key is dead-lettered: the park reason, else its dead timers' errors."""
    if park:
        return b2s(park)
    try:
        failures = json.loads(tf) if tf else {}
        return "; ".join(f"{k}: {f.get('error', '')}" for k, f in failures.items() if f.get("dead"))
    except (ValueError, TypeError, AttributeError, RecursionError):
        return "timer bookkeeping is damaged"


def _wanted_keys(keys: Sequence[str]) -> list[str]:
    """A batch of instance keys, each checked (a lone str is a mistake)."""
    if isinstance(keys, str):
        raise InvalidConfigError("keys must be a list of keys, not a str", path="keys")
    return [validate_key(k) for k in keys]
