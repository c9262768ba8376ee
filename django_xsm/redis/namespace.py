"""The namespace's schema marker: layout version, bucket count and a random
namespace id, read on first use (construction does no I/O) and by every
``health()``; a marker found with another id means Redis lost the
namespace (``LayoutState.reset``). Also the reading of ``CONFIG GET``
replies for ``persists_data()``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Generator, Sequence
from typing import Any

from django_xsm.exceptions import StoreError

from .calls import Call, b2s, stream_fields
from .keys import DEFAULT_BUCKETS, LAYOUT_VERSION, MAX_BUCKETS, KeyLayout

__all__ = ["UPGRADABLE", "LayoutState", "config_value", "parse_schema", "upgrade_call"]

logger = logging.getLogger("django_xsm.redis")


def parse_schema(prefix: str, reply: Sequence[Any], wanted_buckets: int | None) -> KeyLayout:
    """The layout recorded in a namespace's schema marker."""
    try:
        layout = int(b2s(reply[0]))
        buckets = int(b2s(reply[1]))
        if layout < 1 or not 1 <= buckets <= MAX_BUCKETS:
            raise ValueError(layout, buckets)
    except (TypeError, ValueError, IndexError):
        raise StoreError(
            f"The schema marker of namespace {prefix!r} is unreadable",
            hint=f"inspect the hash {KeyLayout.schema_key_for(prefix)!r}; something "
            "else may use this prefix",
        ) from None
    if layout < LAYOUT_VERSION:
        raise StoreError(
            f"Namespace {prefix!r} uses key layout {layout}; this django-xsm "
            f"writes layout {LAYOUT_VERSION}",
            hint="stop every process running the older django-xsm, then run "
            "`manage.py xsm_namespace --upgrade-layout` (or "
            "RedisStore.upgrade_layout()); existing records stay readable "
            "(docs/redis.md, 'Layout versions')",
        )
    if layout > LAYOUT_VERSION:
        raise StoreError(
            f"Namespace {prefix!r} uses key layout {layout}; this django-xsm "
            f"understands up to {LAYOUT_VERSION}",
            hint="upgrade django-xsm on this host",
        )
    if wanted_buckets is not None and wanted_buckets != buckets:
        raise StoreError(
            f"Namespace {prefix!r} was created with {buckets} buckets, not {wanted_buckets}",
            hint="the bucket count is fixed per namespace; drop the buckets "
            "argument or use another prefix",
        )
    return KeyLayout(prefix, buckets)


class LayoutState:
    """The namespace layout, read from the schema marker on first need, and
    the random namespace id written when the namespace was created. A
    marker that later carries another id (Redis lost its data and the
    namespace was created again) sets ``reset`` and logs one ERROR."""

    def __init__(self, prefix: str, buckets: int | None) -> None:
        KeyLayout(prefix, buckets or DEFAULT_BUCKETS)  # validates both early
        self.prefix = prefix
        self.wanted = buckets
        self.layout: KeyLayout | None = None
        self.namespace_id = ""
        self.reset = False

    def schema_call(self) -> Call:
        return Call(
            "SCHEMA",
            [KeyLayout.schema_key_for(self.prefix)],
            [LAYOUT_VERSION, self.wanted or DEFAULT_BUCKETS, secrets.token_hex(8)],
        )

    def ensure(self) -> Generator[Call, Any, KeyLayout]:
        if self.layout is None:
            self.seen((yield self.schema_call()))
        assert self.layout is not None
        return self.layout

    def seen(self, reply: Sequence[Any]) -> KeyLayout:
        """Take a SCHEMA reply: the layout, and whether the id changed."""
        layout = parse_schema(self.prefix, reply, self.wanted)
        found = b2s(reply[2]) if len(reply) > 2 else ""
        if self.namespace_id and found != self.namespace_id and not self.reset:
            self.reset = True
            logger.error(
                "xsm namespace %r was reset: Redis lost its data (the schema marker "
                "was recreated); every instance stored before is gone. Run Redis "
                "with persistence (appendonly yes) and restore from a backup",
                self.prefix,
            )
        if found and not self.namespace_id:
            self.namespace_id = found
        if self.layout is None:
            self.layout = layout
        return self.layout


#: The layouts ``upgrade_layout`` moves from (each to the next): records of
#: layout 1 read as layout 2 (docs/redis.md, "Layout versions").
UPGRADABLE = {1: 2}


def upgrade_call(prefix: str, from_layout: int) -> Call:
    return Call(
        "UPGRADE_LAYOUT",
        [KeyLayout.schema_key_for(prefix)],
        [from_layout, UPGRADABLE[from_layout]],
    )


def config_value(reply: Any, name: str) -> str:
    """One value of a CONFIG GET reply (a flat list, or a dict with RESP3)."""
    return b2s(stream_fields(reply or ()).get(name.encode())).strip()
