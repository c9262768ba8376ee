"""Re-encrypt a namespace with the codec's newest key (``xsm_reencrypt``).

Walks every key of the namespace with ``SCAN`` (resumable: each step
reports its cursor) and rewrites each value an older key encrypted:
snapshots (``d``, whole or in parts), the receipts of idempotency rows,
the sealed fields of log records, outbox entries, entries waiting for a
retry and dead letters. Values the newest key wrote, and values in clear,
are left alone.

A value is rewritten only while it is still what was read: hashes through
``HASH_CAS``, streams through ``STREAM_REWRITE`` (a log or the dead letters
are rebuilt with the same ids; in the outbox the undelivered entries move
to the end in order, and entries a worker holds are left for the next
run). A concurrent commit is never lost: a key that changed between the
read and the rewrite is read again (three times at most) and otherwise
counted as ``busy``.
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

from .calls import Call, b2s, join_long
from .client import SyncSide, is_cluster
from .core import Cmd, Op
from .keys import LONG_PART, escape_glob
from .outbox_entries import stream_fields, stream_rows

__all__ = ["ReencryptStep", "Reencryptor"]

#: How often a key that changed under a rewrite is read again.
ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class ReencryptStep:
    """One ``SCAN`` step: ``cursor`` to resume from (0: done), the keys it
    saw, the values rewritten (or, in a dry run, to rewrite) and the
    values left for another run (``busy``: changed concurrently each time,
    or held by an outbox worker)."""

    cursor: int
    keys: int
    values: int
    busy: int


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
            values = busy = 0
            for name in names:
                done, left = self._key(name, dry_run)
                values, busy = values + done, busy + left
            yield ReencryptStep(cursor, len(names), values, busy)
            if cursor == 0:
                return

    def _send(self, request: Cmd | Call, key: str | None = None) -> Any:
        def op() -> Op[Any]:
            return (yield request)

        return self.driver.run(op(), key)

    # --- one key ------------------------------------------------------------------

    def _key(self, name: str, dry_run: bool) -> tuple[int, int]:
        found = self._name.match(name)
        if found is None:
            return 0, 0
        kind = found.group(1)
        for _ in range(ATTEMPTS):
            if kind in ("s:", "in:", "obw"):
                changes, count = self._hash_changes(name, kind)
                if dry_run or not changes:
                    return count, 0
                if int(self._send(Call("HASH_CAS", [name], changes), name)):
                    return count, 0
                continue
            mode = "tail" if kind == "ob" else "rebuild"
            quads = self._stream_changes(name)
            if dry_run or not quads:
                return len(quads) // 4, 0
            group = self.group if mode == "tail" else ""
            done, changed, held = self._send(
                Call("STREAM_REWRITE", [name], [mode, group, *quads]), name
            )
            if not int(changed):
                return int(done), int(held)
        return 0, 1

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

    def _json_token(self, value: Any) -> Any:
        """A value read from JSON: rotated when sealed, else unchanged."""
        rotated = self._token(value) if isinstance(value, str) else None
        return value if rotated is None else rotated.decode()

    def _hash_changes(self, name: str, kind: str) -> tuple[list[Any], int]:
        """HASH_CAS's arguments for ``name`` and how many values they rewrite
        (a snapshot in parts is one value)."""
        h: Mapping[bytes, Any] = self._send(Cmd("HGETALL", (name,)), name) or {}
        h = {k if isinstance(k, bytes) else str(k).encode(): v for k, v in h.items()}
        if kind == "s:":
            parts = self._snapshot_changes(h)
            return parts, 1 if parts else 0
        out: list[Any] = []
        for field, raw in h.items():
            new: Any
            try:
                doc = json.loads(raw)
            except ValueError:
                continue  # damaged: the readers report it
            if kind == "in:" and isinstance(doc, dict) and "r" in doc:
                new = dict(doc, r=self._json_token(doc["r"]))
            elif kind == "obw" and isinstance(doc, list):
                new = [self._json_token(v) for v in doc]
            else:
                continue
            if new != doc:
                out += [field, raw, json.dumps(new, separators=(",", ":"))]
        return out, len(out) // 3

    def _snapshot_changes(self, h: Mapping[bytes, Any]) -> list[Any]:
        data = join_long(h, b"d")
        if data is None or data[:1] == b"{" or self.codec.is_current(data):
            return []  # absent, in clear, or current
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

    def _stream_changes(self, name: str) -> list[Any]:
        rows: Sequence[tuple[str, Any]] = stream_rows(
            self._send(Cmd("XRANGE", (name, "-", "+")), name)
        )
        out: list[Any] = []
        for sid, raw in rows:
            for field, value in stream_fields(raw).items():
                new = self._token(value)
                if new is not None:
                    out += [sid, field, value, new]
        return out
