"""Sealed values: the codec's encryption applied to stored user data
besides snapshots (stored responses, outbox entries, log payloads).

A codec that can seal (:class:`SealingCodec`, e.g. ``FernetCodec``) turns a
text into ``SEALED`` + a token; :func:`seal` does that when the codec can
and leaves the text as it is otherwise. :func:`unseal` reads both forms: a
value that does not start with ``SEALED`` was written in clear (before a
codec was configured, or by a codec that does not seal) and is returned
as it is. The marker starts with an ESC control character, so a clear value
(JSON text, an actor, an error message) does not start with it by chance.
Sealed values are opaque to the Lua scripts, which only store them.
"""

from __future__ import annotations

from typing import Any, Protocol, cast, runtime_checkable

__all__ = [
    "SEALED",
    "SealingCodec",
    "UnsealError",
    "is_sealed",
    "seal",
    "seal_bytes",
    "seals",
    "unseal",
    "unseal_bytes",
]

#: The prefix of every sealed value (ESC, then ``xsm1:``).
SEALED = "\x1bxsm1:"
_SEALED_B = SEALED.encode()


class UnsealError(ValueError):
    """A sealed value none of the configured keys opens (or no codec that
    can unseal is configured). A ``ValueError``: readers treat it as a
    damaged value."""


@runtime_checkable
class SealingCodec(Protocol):
    """A codec that also encrypts opaque values: ``seal`` returns ASCII
    text (the token, without the marker), ``unseal`` its plaintext bytes
    or raises ``ValueError``; ``rotate_token`` the token under the newest
    key, ``is_current`` whether the newest key wrote it."""

    def seal(self, plain: bytes) -> str: ...

    def unseal(self, token: str) -> bytes: ...

    def rotate_token(self, token: str) -> str: ...

    def is_current(self, token: str | bytes) -> bool: ...


def seals(codec: object) -> bool:
    """True when ``codec`` is a :class:`SealingCodec` (decided once per
    codec class: a runtime protocol check costs tens of microseconds, and
    a request seals several values)."""
    kind = type(codec)
    found = _SEALS.get(kind)
    if found is None:
        found = _SEALS[kind] = issubclass(kind, SealingCodec)
    return found


_SEALS: dict[type, bool] = {}


def is_sealed(value: Any) -> bool:
    """True when ``value`` (str or bytes) carries the ``SEALED`` marker."""
    if isinstance(value, bytes):
        return value.startswith(_SEALED_B)
    return isinstance(value, str) and value.startswith(SEALED)


def seal(codec: object, text: str) -> str:
    """``text`` sealed by ``codec``, or ``text`` itself when the codec does
    not seal (JSON, a custom snapshot-only codec)."""
    if seals(codec):
        return SEALED + cast(SealingCodec, codec).seal(text.encode("utf-8", "surrogateescape"))
    return text


def seal_bytes(codec: object, data: bytes) -> bytes:
    """:func:`seal` for a UTF-8 byte string."""
    if seals(codec):
        return (SEALED + cast(SealingCodec, codec).seal(data)).encode()
    return data


def unseal_bytes(codec: object, value: bytes | str) -> bytes:
    """The plaintext of a stored value: opened when sealed, as it is when
    written in clear. Raises :class:`UnsealError` for a sealed value the
    codec cannot open."""
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
    if not raw.startswith(_SEALED_B):
        return raw
    if not seals(codec):
        raise UnsealError("an encrypted value, and no codec that decrypts is configured")
    try:
        return cast(SealingCodec, codec).unseal(raw[len(_SEALED_B) :].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise UnsealError(
            "an encrypted value none of the configured keys opens (the key that wrote it "
            "was rotated out, is missing here, or the data is not ours)"
        ) from None


def unseal(codec: object, value: bytes | str | None) -> str:
    """:func:`unseal_bytes` as text ('' for None)."""
    if value is None:
        return ""
    return unseal_bytes(codec, value).decode("utf-8", "surrogateescape")
