"""Codecs: exact JSON round-trips or a clear error at save (writing
nothing); Fernet encryption with rotation, bound to key and version."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from typing import Any

import pytest

from django_xsm.exceptions import InvalidConfigError, SnapshotCorruptError, SnapshotTooLargeError
from django_xsm.persistence import FernetCodec, JsonCodec, PessimisticLock, persisted
from tests.redis.helpers import stored_value
from tests.support import BackendFactory, Backends, order_machine

fernet = pytest.importorskip("cryptography.fernet")
M = order_machine()

EXACT: dict[str, Any] = {
    "price": decimal.Decimal("19.990"),
    "tiny": decimal.Decimal("-1E-30"),
    "aware": dt.datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    "naive": dt.datetime(2030, 5, 6, 7, 8, 9),
    "day": dt.date(2030, 5, 6),
    "at": dt.time(7, 8, 9, 10),
    "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "blob": b"\x00\xffbytes",
    "pair": (1, "two", (3.5, None)),
    "rows": [(1, 2), {"nested": decimal.Decimal("1")}],
    "tag_like": {"$xsm": "decimal", "v": "1"},
    "tag_key_only": {"$xsm": 1, "other": [{"$xsm": "dict", "v": {"$xsm": "x"}}]},
    "plain": {"a": [1, 2.5, True, None, "s"]},
}


def roundtrip(codec: Any, value: dict[str, Any], key: str = "o:1", version: int = 1) -> Any:
    return codec.decode(codec.encode(value, key=key, version=version), key=key, version=version)


@pytest.mark.parametrize("name", list(EXACT))
def test_json_codec_round_trips_each_value_exactly(name: str) -> None:
    value = {"context": {name: EXACT[name]}}
    out = roundtrip(JsonCodec(), value)
    assert out == value
    assert type(out["context"][name]) is type(EXACT[name])


def test_values_round_trip_exactly_through_every_store(b: Backends) -> None:
    with persisted(b.store, "o:1", M, context={"items": 0, **EXACT}) as order:
        order.send("ADD")
    with persisted(b.store, "o:1", M) as order:
        assert order.context == {**EXACT, "items": 1}
        assert order.context["aware"].utcoffset() == dt.timedelta(hours=2)
    assert b.store.load("o:1").version == 1  # that read wrote nothing


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        ({"tags": {"a", "b"}}, r"\$\.context\.tags"),
        ({"a": [{"b": object()}]}, r"\$\.context\.a\[0\]\.b"),
        ({"ratio": math.nan}, r"\$\.context\.ratio"),
        ({"ratio": math.inf}, r"\$\.context\.ratio"),
        ({"d": decimal.Decimal("NaN")}, r"\$\.context\.d"),
        ({"by_id": {1: "x"}}, r"\$\.context\.by_id: dict key 1"),
        ({"buf": bytearray(b"x")}, r"\$\.context\.buf"),
    ],
    ids=["set", "object", "nan", "inf", "decimal-nan", "int-key", "bytearray"],
)
def test_values_json_cannot_hold_fail_at_save_naming_the_path_and_write_nothing(
    b: Backends, bad: dict[str, Any], path: str
) -> None:
    with persisted(b.store, "o:1", M) as order:
        order.send("ADD")
    with pytest.raises(TypeError, match=path):
        with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0)) as order:
            order.send("ADD")
            order.context.update(bad)
    record = b.store.load("o:1")
    assert record.version == 1 and record.snapshot["context"] == {"items": 1}
    assert b.store.lock_holder("o:1") is None
    with pytest.raises(TypeError):
        JsonCodec().encode({"context": bad}, key="o:1", version=1)


def test_an_oversized_snapshot_fails_at_save_and_writes_nothing(make: BackendFactory) -> None:
    b = make(max_snapshot_bytes=2_000)
    with persisted(b.store, "o:1", M) as order:
        order.send("ADD")
    with pytest.raises(SnapshotTooLargeError):
        with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0)) as order:
            order.context["blob"] = "x" * 5_000
    assert b.store.load("o:1").version == 1 and b.store.lock_holder("o:1") is None


@pytest.mark.parametrize("data", [b"", b"not json", b"[1, 2]", b'{"$xsm": "nope", "v": 1}'])
def test_undecodable_bytes_are_snapshot_corrupt(data: bytes) -> None:
    with pytest.raises(SnapshotCorruptError):
        JsonCodec().decode(data, key="o:1", version=1)


def test_fernet_round_trips_and_hides_the_plaintext() -> None:
    codec = FernetCodec([fernet.Fernet.generate_key()])
    value = {"context": {"card": "4242 4242", **EXACT}}
    data = codec.encode(value, key="o:1", version=3)
    assert b"4242" not in data and b"card" not in data
    assert codec.decode(data, key="o:1", version=3) == value


def test_fernet_key_rotation_keeps_old_data_readable_and_rotate_reencrypts() -> None:
    old_key, new_key = fernet.Fernet.generate_key(), fernet.Fernet.generate_key()
    value = {"context": {"n": 1}}
    old_data = FernetCodec([old_key]).encode(value, key="o:1", version=1)
    both = FernetCodec([new_key, old_key])
    assert both.decode(old_data, key="o:1", version=1) == value
    rotated = both.rotate(old_data)
    assert FernetCodec([new_key]).decode(rotated, key="o:1", version=1) == value
    with pytest.raises(SnapshotCorruptError):
        FernetCodec([new_key]).decode(old_data, key="o:1", version=1)  # old key dropped


def test_fernet_ciphertext_is_bound_to_its_key_and_version() -> None:
    codec = FernetCodec([fernet.Fernet.generate_key()])
    data = codec.encode({"context": {"n": 1}}, key="o:1", version=1)
    for key, version in (("o:2", 1), ("o:1", 2), ("o:1\x001", 1)):
        with pytest.raises(SnapshotCorruptError, match="another key or version"):
            codec.decode(data, key=key, version=version)
    with pytest.raises(SnapshotCorruptError, match="cannot be decrypted"):
        FernetCodec([fernet.Fernet.generate_key()]).decode(data, key="o:1", version=1)
    with pytest.raises(SnapshotCorruptError):
        codec.decode(data[:-5], key="o:1", version=1)  # tampered


@pytest.mark.parametrize("keys", [[], "k", [b"short"], ["not base64!"]])
def test_fernet_needs_a_list_of_valid_keys(keys: Any) -> None:
    with pytest.raises(InvalidConfigError):
        FernetCodec(keys)


def test_fernet_works_through_the_stores(make: BackendFactory) -> None:
    key = fernet.Fernet.generate_key()
    b = make(codec=FernetCodec([key]))
    with persisted(b.store, "o:1", M, context={"items": 0, "secret": "s3cr3t"}) as order:
        order.send("ADD")
    with persisted(b.store, "o:1", M) as order:
        assert order.context == {"items": 1, "secret": "s3cr3t"}
    if b.client is not None:
        raw = stored_value(b.client, b.store.layout.snapshot("o:1"), "d")
        assert raw and b"s3cr3t" not in raw
    rotated_store = make(codec=FernetCodec([fernet.Fernet.generate_key()]))
    assert rotated_store.store.load("o:1") is None  # another namespace; nothing shared


def test_fernet_ciphertext_copied_to_another_instance_or_version_fails_on_redis(
    make: BackendFactory,
) -> None:
    b = make(codec=FernetCodec([fernet.Fernet.generate_key()]))
    if b.client is None:
        pytest.skip("copies raw Redis fields")
    for key in ("o:1", "o:2"):
        with persisted(b.store, key, M) as order:
            order.send("ADD")
    snap = b.store.layout.snapshot
    v1 = stored_value(b.client, snap("o:1"), "d")
    b.client.hset(snap("o:2"), "d", v1)  # same version, another instance
    with pytest.raises(SnapshotCorruptError):
        b.store.load("o:2")
    with persisted(b.store, "o:1", M) as order:
        order.send("ADD")
    b.client.hset(snap("o:1"), "d", v1)  # an old ciphertext replayed at version 2
    with pytest.raises(SnapshotCorruptError):
        b.store.load("o:1")


def test_an_encrypted_snapshot_without_its_key_says_so_and_names_the_setting() -> None:
    data = FernetCodec([fernet.Fernet.generate_key()]).encode({"n": 1}, key="o:1", version=4)
    assert data.startswith(b"gAAAA")
    without = [
        (JsonCodec(), "is encrypted, and no codec that decrypts is configured"),
        (FernetCodec([fernet.Fernet.generate_key()]), "cannot be decrypted with the configured"),
    ]
    for codec, said in without:
        with pytest.raises(SnapshotCorruptError) as info:
            codec.decode(data, key="o:1", version=4)
        assert info.value.encrypted and said in info.value.message
        assert "XSM['CODEC_KEYS']" in info.value.hint and "xsm_forget" not in str(info.value)


def test_damage_that_is_not_encryption_keeps_the_damaged_data_hint() -> None:
    strict = FernetCodec([fernet.Fernet.generate_key()], accept_clear=False)
    for codec, data in ((JsonCodec(), b"{not json"), (strict, b'{"n": 1}')):
        with pytest.raises(SnapshotCorruptError) as info:
            codec.decode(data, key="o:1", version=4)
        assert not info.value.encrypted and "xsm_forget" in info.value.hint
