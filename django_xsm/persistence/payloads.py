"""The size rule of event payloads: ``max_payload_bytes`` (docs/persistence.md,
"Codecs and limits").

A payload larger than the limit in the form the transition log stores it
(compact UTF-8 JSON, before redaction) is refused with
:class:`PayloadTooLargeError` before the event runs and before any I/O of
its send. Measuring is serialising: with a limit, a value JSON cannot
hold exactly is refused by the same check (``UnstorableValueError``,
``DataTooDeepError``). ``None`` measures nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError, PayloadTooLargeError

from .codecs import dumps_text, to_json_ready

__all__ = ["check_payload", "payload_size", "validate_max_payload_bytes"]


def validate_max_payload_bytes(value: object) -> int | None:
    """``max_payload_bytes``: None (no limit) or an int of at least 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigError(
            f"max_payload_bytes must be None or an int >= 1, got {brief(value)}",
            path="max_payload_bytes",
            hint="the largest event payload accepted, in bytes of JSON (e.g. 65536)",
        )
    return value


def payload_size(data: Mapping[str, Any]) -> int:
    """Bytes of ``data`` as compact UTF-8 JSON (0 for no payload); raises
    what storing it would (``UnstorableValueError``, ``DataTooDeepError``)."""
    if not data:
        return 0
    return len(dumps_text(to_json_ready(dict(data), "$.payload"), "$.payload"))


def check_payload(event_type: str, data: Mapping[str, Any], limit: int | None) -> None:
    """Refuse ``data`` (the payload of ``event_type``) when it is over
    ``limit`` bytes (see the module docstring); no check when ``limit`` is
    None."""
    if limit is None or not data:
        return
    size = payload_size(data)
    if size > limit:
        raise PayloadTooLargeError(event_type, size=size, limit=limit)
