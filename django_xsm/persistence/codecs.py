"""Snapshot codecs: compact JSON by default, Fernet encryption optionally.

JSON cannot hold every value a context may carry. :class:`JsonCodec`
round-trips ``Decimal``, ``datetime``/``date``/``time``, ``UUID``, ``bytes``
and tuples exactly (as tagged objects), and raises ``TypeError`` naming the
path of anything else (sets, objects, non-string dict keys, NaN) instead of
silently turning it into a string, as ``json.dumps(default=str)`` would.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import math
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django_xsm.brief import brief
from django_xsm.engine.run.context import MAX_DATA_DEPTH, too_deep
from django_xsm.exceptions import (
    InvalidConfigError,
    SnapshotCorruptError,
    SnapshotTooLargeError,
    UnstorableValueError,
)

from .base import Codec
from .records import CommitUnit

__all__ = [
    "FernetCodec",
    "JsonCodec",
    "dumps_text",
    "encode_snapshot",
    "is_fernet_token",
    "loads_tagged",
    "to_json_ready",
]

# The tag key marks an encoded non-JSON value; a user dict that happens to
# contain it is stored as {"$xsm": "dict", "v": [[key, value], ...]} so
# decoding never mistakes user data for a tag. Pairs, not a nested object:
# json's object_hook runs innermost first, so a nested object holding the
# tag key would be decoded as a tag before its wrapper is seen.
_TAG = "$xsm"


def _tag(kind: str, value: Any) -> dict[str, Any]:
    return {_TAG: kind, "v": value}


def to_json_ready(value: Any, path: str = "$") -> Any:
    """``value`` with every non-JSON leaf replaced by its tagged form.

    Raises :class:`UnstorableValueError` (a ``TypeError`` and a
    ``ValueError``, with the path, e.g. ``$.context.tags``) for a value that
    cannot be represented exactly: a string with a lone surrogate, an int
    of more digits than Python turns into text, and data nested more than
    the engine's ``MAX_DATA_DEPTH`` levels (:class:`DataTooDeepError`,
    naming ``path``) included.
    """
    return _ready(value, path, path, 1)


def _ready(value: Any, path: str, root: str, depth: int) -> Any:
    # Ordered by frequency: plain JSON scalars dominate real contexts.
    if isinstance(value, str):
        if not value.isascii():
            _check_text(value, path)
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value.bit_length() > _SAFE_INT_BITS and _has_long_int(value):
            raise _long_int(value, path)
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnstorableValueError(path, f"{value!r} is not representable in JSON")
        return value
    if isinstance(value, dict | list | tuple) and depth > MAX_DATA_DEPTH:
        raise too_deep(root)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise UnstorableValueError(
                    path,
                    f"dict key {brief(k)} is a {type(k).__name__}; JSON "
                    "object keys must be strings (convert it yourself)",
                )
            if not k.isascii():
                _check_text(k, f"{path} key {brief(k)}")
            out[k] = _ready(v, f"{path}.{k}", root, depth + 1)
        return _tag("dict", [[k, v] for k, v in out.items()]) if _TAG in out else out
    if isinstance(value, list):
        return [_ready(v, f"{path}[{i}]", root, depth + 1) for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return _tag(
            "tuple", [_ready(v, f"{path}[{i}]", root, depth + 1) for i, v in enumerate(value)]
        )
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise UnstorableValueError(path, f"{brief(value)} is not a finite Decimal")
        return _tag("decimal", str(value))
    if isinstance(value, _dt.datetime):
        return _tag("datetime", value.isoformat())
    if isinstance(value, _dt.date):
        return _tag("date", value.isoformat())
    if isinstance(value, _dt.time):
        return _tag("time", value.isoformat())
    if isinstance(value, uuid.UUID):
        return _tag("uuid", str(value))
    if isinstance(value, bytes):
        return _tag("bytes", base64.b64encode(value).decode("ascii"))
    raise UnstorableValueError(
        path,
        f"{type(value).__name__} value {brief(value)} cannot be stored; "
        "use JSON types, Decimal, datetime, date, time, UUID, bytes or tuples",
    )


#: Ints of at most this many bits always convert to text (Python's digit
#: limit, ``sys.set_int_max_str_digits()``, is at least 640 digits).
_SAFE_INT_BITS = 2_000


def _has_long_int(value: Any) -> bool:
    """An int JSON cannot hold: more digits than Python converts to text
    (``sys.get_int_max_str_digits()``, 4300 by default)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    if value.bit_length() <= _SAFE_INT_BITS:
        return False
    try:
        int.__repr__(value)
    except ValueError:
        return True
    return False


def _long_int(value: int, path: str) -> UnstorableValueError:
    digits = int(value.bit_length() * 0.30103) + 1
    return UnstorableValueError(
        path,
        f"an int of about {digits} digits has more digits than Python converts to "
        f"text (sys.get_int_max_str_digits() is {sys.get_int_max_str_digits()})",
        hint="store such a number as a string",
    )


_TEXT_HINT = "strings must be valid Unicode text; reject or repair the input"


def _check_text(text: str, path: str) -> None:
    if _has_surrogate(text):
        raise UnstorableValueError(
            path,
            f"{brief(text)} holds a lone surrogate, which UTF-8 cannot store",
            hint=_TEXT_HINT,
        )


def _has_surrogate(value: Any) -> bool:
    if not isinstance(value, str) or value.isascii():
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return True
    return False


def _first_bad(value: Any, path: str, bad: Callable[[Any], bool]) -> tuple[str, Any] | None:
    """The path and the value of the first leaf (or dict key) of ``value``
    that ``bad`` flags, or None. Iterative: any depth."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, Mapping):
            for k, v in item.items():
                if bad(k):
                    return f"{where} key {brief(k)}", k
                stack.append((v, f"{where}.{k}"))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
        elif bad(item):
            return where, item
    return None


def dumps_text(value: Any, path: str = "$") -> bytes:
    """Compact UTF-8 JSON of JSON-ready ``value``; a string with a lone
    surrogate or an int longer than Python converts to text raises
    :class:`UnstorableValueError` naming its path, instead of
    ``UnicodeEncodeError`` or ``ValueError``."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except ValueError:  # int-to-text conversion past sys.get_int_max_str_digits()
        found = _first_bad(value, path, _has_long_int)
        if found is None:
            raise
        raise _long_int(found[1], found[0]) from None
    try:
        return text.encode()
    except UnicodeEncodeError:
        found = _first_bad(value, path, _has_surrogate)
        raise UnstorableValueError(
            found[0] if found else path,
            "a string holds a lone surrogate, which UTF-8 cannot store",
            hint=_TEXT_HINT,
        ) from None


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "decimal": decimal.Decimal,
    "datetime": _dt.datetime.fromisoformat,
    "date": _dt.date.fromisoformat,
    "time": _dt.time.fromisoformat,
    "uuid": uuid.UUID,
    "bytes": lambda v: base64.b64decode(v.encode("ascii")),
    "tuple": tuple,
    # A list of pairs; a plain object is the first cut's format, kept readable.
    "dict": lambda v: dict(v) if isinstance(v, list) else v,
}


def _object_hook(obj: dict[str, Any]) -> Any:
    kind = obj.get(_TAG)
    if kind is None or len(obj) != 2 or "v" not in obj:
        return obj
    decoder = _DECODERS.get(kind) if isinstance(kind, str) else None
    if decoder is None:
        raise ValueError(f"unknown tag {brief(kind)}")
    try:
        return decoder(obj["v"])
    except Exception as exc:  # {"$xsm": "uuid", "v": 5} and the like: damaged, not a crash
        raise ValueError(f"bad {kind} value ({type(exc).__name__})") from None


def _has_special(value: Any) -> bool:
    """True when a plain ``json.dumps`` would not be exact."""
    if isinstance(value, dict):
        return any(not isinstance(k, str) or k == _TAG or _has_special(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_special(v) for v in value)
    if value is None or isinstance(value, str | bool | int):
        return False
    if isinstance(value, float):
        return not math.isfinite(value)
    return True


class JsonCodec:
    """Compact UTF-8 JSON with exact round-trips for common Python types."""

    name = "json"

    def encode(self, snapshot: Mapping[str, Any], *, key: str, version: int) -> bytes:
        data: Any = snapshot
        # Fast path: most snapshots are plain JSON and need no copy.
        if _has_special(data):
            data = to_json_ready(dict(snapshot))
        return dumps_text(data)

    def decode(self, data: bytes, *, key: str, version: int) -> dict[str, Any]:
        try:
            value = json.loads(data, object_hook=_object_hook)
        except (ValueError, TypeError, decimal.InvalidOperation, RecursionError) as exc:
            if is_fernet_token(data):
                raise SnapshotCorruptError(
                    f"Snapshot of {key!r} (version {version}) is encrypted, and no codec "
                    "that decrypts is configured",
                    key=key,
                    encrypted=True,
                ) from None
            raise SnapshotCorruptError(
                f"Snapshot of {key!r} (version {version}) is not valid JSON: {type(exc).__name__}",
                key=key,
            ) from None
        if not isinstance(value, dict):
            raise SnapshotCorruptError(
                f"Snapshot of {key!r} is a {type(value).__name__}, not an object",
                key=key,
            )
        return value


class FernetCodec:
    """Encrypts snapshots with Fernet (AES-128-CBC + HMAC-SHA256).

    ``keys``: Fernet keys, newest first; the first encrypts, all decrypt
    (``cryptography``'s ``MultiFernet``; rotation: add the new key in
    front, run ``manage.py xsm_reencrypt``, then drop the old one). The
    plaintext starts with the instance key and the version, checked on
    decode, so ciphertext copied to another key or replayed at another
    version is rejected as corrupt.

    Besides snapshots it seals the other stored user data (stored
    responses, outbox entries, log payloads: :mod:`.sealing`).
    ``accept_clear``: read values written in clear before the codec was
    enabled (a snapshot that is JSON, a value without the sealed marker);
    ``False`` refuses them as damaged, so nobody who can write to Redis
    can plant a clear record.

    Needs the ``crypto`` extra (``pip install django-xsm[crypto]``).
    """

    name = "fernet"

    def __init__(
        self,
        keys: Sequence[str | bytes],
        *,
        inner: JsonCodec | None = None,
        accept_clear: bool = True,
    ) -> None:
        try:
            from cryptography.fernet import Fernet, MultiFernet
        except ImportError:  # pragma: no cover - exercised without the extra
            raise InvalidConfigError(
                "FernetCodec needs the 'cryptography' package",
                path="codec",
                hint="pip install 'django-xsm[crypto]'",
            ) from None
        if isinstance(keys, str | bytes) or not keys:
            raise InvalidConfigError(
                "FernetCodec needs a non-empty list of keys, newest first",
                path="codec.keys",
                hint="generate one with cryptography.fernet.Fernet.generate_key()",
            )
        try:
            fernets = [Fernet(k) for k in keys]
        except (ValueError, TypeError) as exc:
            raise InvalidConfigError(
                f"Invalid Fernet key: {exc}",
                path="codec.keys",
                hint="keys are 32 url-safe base64-encoded bytes",
            ) from None
        self._fernet = MultiFernet(fernets)
        self._newest = fernets[0]
        self._inner = inner or JsonCodec()
        self.accept_clear = accept_clear

    @staticmethod
    def _header(key: str, version: int) -> bytes:
        return f"xsm1\x00{key}\x00{version}\x00".encode()

    def encode(self, snapshot: Mapping[str, Any], *, key: str, version: int) -> bytes:
        body = self._inner.encode(snapshot, key=key, version=version)
        return self._fernet.encrypt(self._header(key, version) + body)

    def decode(self, data: bytes, *, key: str, version: int) -> dict[str, Any]:
        from cryptography.fernet import InvalidToken

        if self.accept_clear and data[:1] == b"{":
            # JSON: written before the codec was enabled (a token never
            # starts with a brace)
            return self._inner.decode(data, key=key, version=version)
        try:
            plain = self._fernet.decrypt(data)
        except (InvalidToken, TypeError, ValueError):
            if not is_fernet_token(data):  # clear data refused (accept_clear=False)
                raise SnapshotCorruptError(
                    f"Snapshot of {key!r} (version {version}) is not encrypted", key=key
                ) from None
            raise SnapshotCorruptError(
                f"Snapshot of {key!r} (version {version}) cannot be decrypted with the "
                "configured keys (the key that wrote it was rotated out, is missing "
                "here, or the data is not ours)",
                key=key,
                encrypted=True,
            ) from None
        header = self._header(key, version)
        if not plain.startswith(header):
            raise SnapshotCorruptError(
                f"Encrypted snapshot stored under {key!r} version {version} was "
                "written for another key or version",
                key=key,
                hint="ciphertext was copied between instances; restore it from the log",
            )
        return self._inner.decode(plain[len(header) :], key=key, version=version)

    def rotate(self, data: bytes) -> bytes:
        """Re-encrypt ``data`` with the newest key (same binding)."""
        return self._fernet.rotate(data)

    def is_current(self, token: str | bytes) -> bool:
        """True when the newest key wrote ``token`` (no rotation needed)."""
        from cryptography.fernet import InvalidToken

        try:
            self._newest.decrypt(token)
        except (InvalidToken, TypeError, ValueError):
            return False
        return True

    # --- sealed values (django_xsm.persistence.sealing) --------------------------

    def seal(self, plain: bytes) -> str:
        """``plain`` encrypted with the newest key, as ASCII text."""
        return self._fernet.encrypt(plain).decode("ascii")

    def unseal(self, token: str) -> bytes:
        """The plaintext of a :meth:`seal` token; ``ValueError`` when no
        configured key opens it."""
        return self._opened(self._fernet.decrypt, token)

    def rotate_token(self, token: str) -> str:
        """A :meth:`seal` token re-encrypted with the newest key."""
        return self._opened(self._fernet.rotate, token).decode("ascii")

    @staticmethod
    def _opened(step: Callable[[str], bytes], token: str) -> bytes:
        from cryptography.fernet import InvalidToken

        try:
            return step(token)
        except (InvalidToken, TypeError):
            raise ValueError("no configured key opens this value") from None


#: How every Fernet token starts: version byte 0x80, then a timestamp
#: whose high bytes are zero until 2106 (url-safe base64).
_FERNET_PREFIX = b"gAAAA"


def is_fernet_token(data: bytes) -> bool:
    """True when ``data`` looks like a Fernet token (an encrypted snapshot),
    which neither JSON nor anything else django-xsm stores starts with."""
    return data.startswith(_FERNET_PREFIX)


def loads_tagged(data: str | bytes) -> Any:
    """``json.loads`` that turns tagged values back into Python objects
    (the inverse of ``json.dumps(to_json_ready(value))``). Anything it
    cannot read raises ``ValueError`` (data nested too deeply included)."""
    try:
        return json.loads(data, object_hook=_object_hook)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def encode_snapshot(codec: Codec, unit: CommitUnit, limit: int) -> bytes | None:
    """The bytes ``unit``'s snapshot is stored as (None: it writes none),
    bound to the version it produces. Raises ``SnapshotTooLargeError``
    over ``limit`` bytes, before any write."""
    if unit.snapshot is None:
        return None
    data = codec.encode(unit.snapshot, key=unit.key, version=unit.new_version)
    if len(data) > limit:
        raise SnapshotTooLargeError(unit.key, size=len(data), limit=limit)
    return data
