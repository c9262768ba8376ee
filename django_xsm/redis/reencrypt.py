"""Re-encrypt a namespace with the codec's newest key (``xsm_reencrypt``,
docs/commands.md).

Walks the namespace with ``SCAN`` (resumable: each step reports its cursor)
and rewrites each value an older key encrypted; values in clear are only
counted. A value is rewritten only while it is still what was read
(``HASH_CAS``, ``STREAM_REWRITE``; in the outbox the undelivered entries
move to the end in order, entries a worker holds are left): a key that
changed in between is read again (three times at most), else counted as
``busy``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.arguments import validate_prefix
from django_xsm.persistence.sealing import SEALED, SealingCodec, is_sealed

from .calls import Call, b2s, join_long, stream_fields
from .client import SyncSide, is_cluster
from .core import Cmd, Op
from .keys import LONG_PART, escape_glob
from .outbox_entries import stream_rows

__all__ = ["ReencryptStep", "Reencryptor"]

#: How often a key that changed under a rewrite is read again.
ATTEMPTS = 3

#: The fields a codec seals: of a transition record (payload, actor,
#: reason) and of an outbox entry or dead letter (event, last error).
LOG_SEALED = frozenset((b"p", b"a", b"r"))
OUTBOX_SEALED = frozenset((b"e", b"err"))


@dataclass(frozen=True, slots=True)
class ReencryptStep:
    """One ``SCAN`` step: ``cursor`` to resume from (0: done), the keys it
    saw, the values rewritten (or, in a dry run, to rewrite), the
    values left for another run (``busy``: changed concurrently each time,
    or held by an outbox worker) and the values stored in clear (``clear``:
    written before the codec was on; this walk does not encrypt them)."""

    cursor: int
    keys: int
    values: int
    busy: int
    clear: int


class Reencryptor(SyncSide):
    """Rewrites the values of namespace ``prefix`` to ``codec``'s newest
    key. ``codec`` must encrypt with rotation (``FernetCodec``); ``group``
    is the outbox's consumer group."""

    def __init__(self, client_or_url: Any, *, prefix: str, codec: Any, group: str = "xsm") -> None:
        if not (isinstance(codec, SealingCodec) and hasattr(codec, "rotate")):
            raise InvalidConfigError(
                "The configured codec does not encrypt with rotating keys",
                path="CODEC",
                hint="configure XSM['CODEC_KEYS'] (FernetCodec), newest key first",
            )
        self._connect(client_or_url)
        if is_cluster(self.client):
            raise InvalidConfigError(
                "xsm_reencrypt scans one server; on a cluster run it against each primary",
                path="client",
            )
        self.prefix = validate_prefix(prefix)
        self.codec = codec
        self.group = group
        self._name = re.compile(
            r"\{" + re.escape(self.prefix) + r":\d+\}:(s:|in:|log:|obw$|obd$|ob$)"
        )

    def run(
        self, *, cursor: int = 0, batch: int = 100, dry_run: bool = False
    ) -> Iterator[ReencryptStep]:
        """One :class:`ReencryptStep` per ``SCAN`` call of ``batch`` keys,
        starting at ``cursor``, until the scan is done (cursor 0)."""
        match = escape_glob("{" + self.prefix + ":") + "*"
        while True:
            reply = self._send(Cmd("SCAN", (cursor, "MATCH", match, "COUNT", batch)))
            cursor, names = int(reply[0]), [b2s(n) for n in reply[1]]
            values = busy = clear = 0
            for name in names:
                done, left, plain = self._key(name, dry_run)
                values, busy, clear = values + done, busy + left, clear + plain
            yield ReencryptStep(cursor, len(names), values, busy, clear)
            if cursor == 0:
                return

    def _send(self, request: Cmd | Call, key: str | None = None) -> Any:
        def op() -> Op[Any]:
            return (yield request)

        return self.driver.run(op(), key)

    # --- one key ------------------------------------------------------------------

    def _key(self, name: str, dry_run: bool) -> tuple[int, int, int]:
        """(values rewritten, values busy, values in clear) of key ``name``."""
        found = self._name.match(name)
        if found is None:
            return 0, 0, 0
        kind = found.group(1)
        clear = 0
        for _ in range(ATTEMPTS):
            if kind in ("s:", "in:", "obw"):
                changes, count, clear = self._hash_changes(name, kind)
                if dry_run or not changes:
                    return count, 0, clear
                if int(self._send(Call("HASH_CAS", [name], changes), name)):
                    return count, 0, clear
                continue
            mode = "tail" if kind == "ob" else "rebuild"
            quads, clear = self._stream_changes(
                name, LOG_SEALED if kind == "log:" else OUTBOX_SEALED
            )
            if dry_run or not quads:
                return len(quads) // 4, 0, clear
            group = self.group if mode == "tail" else ""
            done, changed, held = self._send(
                Call("STREAM_REWRITE", [name], [mode, group, *quads]), name
            )
            if not int(changed):
                return int(done), int(held), clear
        return 0, 1, clear

    def _token(self, value: Any) -> bytes | None:
        """The sealed ``value`` under the newest key (None: nothing to do)."""
        if not is_sealed(value):
            return None
        token = b2s(value)[len(SEALED) :]
        if self.codec.is_current(token):
            return None
        try:
            return (SEALED + self.codec.rotate_token(token)).encode()
        except ValueError:
            return None  # no key opens it: the readers report it

    @staticmethod
    def _in_clear(value: Any) -> bool:
        """True for a non-empty value stored without the ``SEALED`` marker."""
        return bool(value) and isinstance(value, str | bytes) and not is_sealed(value)

    def _json_token(self, value: Any) -> Any:
        """A value read from JSON: rotated when sealed, else unchanged."""
        rotated = self._token(value) if isinstance(value, str) else None
        return value if rotated is None else rotated.decode()

    def _hash_changes(self, name: str, kind: str) -> tuple[list[Any], int, int]:
        """HASH_CAS's arguments for ``name``, how many values they rewrite
        (a snapshot in parts is one value) and how many are in clear."""
        h = stream_fields(self._send(Cmd("HGETALL", (name,)), name) or {})
        if kind == "s:":
            data = join_long(h, b"d")
            if data is not None and data[:1] == b"{":
                return [], 0, 1  # a snapshot in clear is JSON
            parts = self._snapshot_changes(h, data)
            return parts, 1 if parts else 0, 0
        out: list[Any] = []
        clear = 0
        for field, raw in h.items():
            new: Any
            try:
                doc = json.loads(raw)
            except ValueError:
                continue  # damaged: the readers report it
            if kind == "in:" and isinstance(doc, dict) and "r" in doc:
                clear += self._in_clear(doc["r"])
                new = dict(doc, r=self._json_token(doc["r"]))
            elif kind == "obw" and isinstance(doc, list):
                names = [str(n).encode() for n in doc[::2]]
                clear += sum(
                    n in OUTBOX_SEALED and self._in_clear(v)
                    for n, v in zip(names, doc[1::2], strict=False)
                )
                new = [self._json_token(v) for v in doc]
            else:
                continue
            if new != doc:
                out += [field, raw, json.dumps(new, separators=(",", ":"))]
        return out, len(out) // 3, clear

    def _snapshot_changes(self, h: Mapping[bytes, Any], data: bytes | None) -> list[Any]:
        if data is None or self.codec.is_current(data):
            return []  # absent or current
        try:
            new = self.codec.rotate(data)
        except ValueError:
            return []  # no key opens it: the readers report it
        if b"d" in h:
            return [b"d", data, new]
        if len(new) != len(data):  # a Fernet token's length follows its plaintext's
            return []
        return [
            x
            for i in range(0, len(data), LONG_PART)
            for x in (
                f"d{i // LONG_PART + 1}".encode(),
                data[i : i + LONG_PART],
                new[i : i + LONG_PART],
            )
        ]

    def _stream_changes(self, name: str, sealable: frozenset[bytes]) -> tuple[list[Any], int]:
        """STREAM_REWRITE's quads for ``name`` and how many of its
        ``sealable`` fields are in clear."""
        rows: Sequence[tuple[str, Any]] = stream_rows(
            self._send(Cmd("XRANGE", (name, "-", "+")), name)
        )
        out: list[Any] = []
        clear = 0
        for sid, raw in rows:
            for field, value in stream_fields(raw).items():
                clear += field in sealable and self._in_clear(value)
                new = self._token(value)
                if new is not None:
                    out += [sid, field, value, new]
        return out, clear
