"""django_xsm.conf: defaults, validation naming the key, cache and reset."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_xsm import backend as stores
from django_xsm import conf


def test_defaults_fill_every_key(settings: Any):
    settings.XSM = {"PREFIX": "shop"}
    s = conf.get_settings()
    assert s.prefix == "shop"
    assert s.lock == "adaptive"
    assert s.lock_ttl_ms == 30_000
    assert s.idempotency.header == "Idempotency-Key"
    assert s.idempotency.required == frozenset({"POST"})
    assert s.idempotency.ttl_s == 86_400
    assert s.audit.enabled is True
    assert s.audit.maxlen is None
    assert s.timers.max_attempts == 10
    assert s.request_id_header == "X-Request-ID"
    assert s.max_payload_bytes == 65536


def test_stream_defaults_and_merging(settings: Any):
    settings.XSM = {"PREFIX": "shop", "STREAM": {"MAX_SECONDS": None, "HEARTBEAT_S": 5}}
    s = conf.get_settings().stream
    assert (s.heartbeat_s, s.max_seconds, s.max_connections) == (5.0, None, 1000)
    assert s.permission == "django_xsm.stream.staff_may_view"
    settings.XSM = {"PREFIX": "shop"}
    assert conf.get_settings().stream.max_seconds == 300


def test_nested_dicts_merge_key_by_key(settings: Any):
    settings.XSM = {"PREFIX": "shop", "AUDIT": {"MAXLEN": 100}, "IDEMPOTENCY": {"TTL_S": 60}}
    s = conf.get_settings()
    assert s.audit.maxlen == 100
    assert s.audit.enabled is True  # kept from DEFAULTS
    assert s.idempotency.ttl_s == 60
    assert s.idempotency.header == "Idempotency-Key"


def test_no_xsm_setting_at_all_uses_defaults(settings: Any):
    del settings.XSM
    s = conf.get_settings()
    assert s.prefix is None
    assert s.machines == {}


@pytest.mark.parametrize(
    ("value", "named", "hint"),
    [
        ({"PREFX": "x"}, "XSM['PREFX']", "did you mean 'PREFIX'?"),
        ({"REDIS": "x"}, "XSM['REDIS']", "did you mean"),
        ({"IDEMPOTENCY": {"HEADERS": "X"}}, "XSM['IDEMPOTENCY']['HEADERS']", "'HEADER'"),
        ({"AUDIT": {"MAX_LEN": 5}}, "XSM['AUDIT']['MAX_LEN']", "'MAXLEN'"),
        ({"TIMERS": {"ATTEMPTS": 5}}, "XSM['TIMERS']['ATTEMPTS']", "MAX_ATTEMPTS"),
        ({"lock": "optimistic"}, "XSM['lock']", "'LOCK'"),
    ],
)
def test_unknown_keys_are_named(settings: Any, value: dict[str, Any], named: str, hint: str):
    settings.XSM = value
    with pytest.raises(ImproperlyConfigured) as info:
        conf.get_settings()
    assert named in str(info.value)
    assert hint in str(info.value)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"LOCK": "mutex"}, "XSM['LOCK']"),
        ({"LOCK_TTL_MS": "30000"}, "XSM['LOCK_TTL_MS']"),
        ({"LOCK_TTL_MS": 0}, "XSM['LOCK_TTL_MS']"),
        ({"LOCK_TIMEOUT_S": -1}, "XSM['LOCK_TIMEOUT_S']"),
        ({"CONFLICT_RETRIES": 1.5}, "XSM['CONFLICT_RETRIES']"),
        ({"CONFLICT_RETRIES": True}, "XSM['CONFLICT_RETRIES']"),
        ({"MACHINES": ["order"]}, "XSM['MACHINES']"),
        ({"REDIS_URL": 6379}, "XSM['REDIS_URL']"),
        ({"REDIS_URL": ""}, "XSM['REDIS_URL']"),
        ({"REDIS_OPTIONS": "ssl=1"}, "XSM['REDIS_OPTIONS']"),
        ({"PREFIX": 3}, "XSM['PREFIX']"),
        ({"EMBEDDED": "yes"}, "XSM['EMBEDDED']"),
        ({"SOCKET_TIMEOUT_S": 0}, "XSM['SOCKET_TIMEOUT_S']"),
        ({"MAX_SNAPSHOT_BYTES": 1.0}, "XSM['MAX_SNAPSHOT_BYTES']"),
        ({"MAX_PAYLOAD_BYTES": 0}, "XSM['MAX_PAYLOAD_BYTES']"),
        ({"MAX_PAYLOAD_BYTES": None}, "XSM['MAX_PAYLOAD_BYTES']"),
        ({"MAX_PAYLOAD_BYTES": True}, "XSM['MAX_PAYLOAD_BYTES']"),
        ({"MAX_PAYLOAD_BYTES": "64k"}, "XSM['MAX_PAYLOAD_BYTES']"),
        ({"MAX_PAYLOAD_BYTES": 10**13}, "XSM['MAX_PAYLOAD_BYTES']"),
        ({"BUCKETS": 0}, "XSM['BUCKETS']"),
        ({"REQUEST_ID_HEADER": "X Request"}, "XSM['REQUEST_ID_HEADER']"),
        ({"IDEMPOTENCY": "on"}, "XSM['IDEMPOTENCY']"),
        ({"IDEMPOTENCY": {"REQUIRED": "POST"}}, "XSM['IDEMPOTENCY']['REQUIRED']"),
        ({"IDEMPOTENCY": {"REQUIRED": ["GET"]}}, "XSM['IDEMPOTENCY']['REQUIRED']"),
        ({"IDEMPOTENCY": {"REQUIRED": ["FETCH"]}}, "XSM['IDEMPOTENCY']['REQUIRED']"),
        ({"IDEMPOTENCY": {"HEADER": ""}}, "XSM['IDEMPOTENCY']['HEADER']"),
        ({"IDEMPOTENCY": {"TTL_S": 0}}, "XSM['IDEMPOTENCY']['TTL_S']"),
        ({"IDEMPOTENCY": {"MAX_RESPONSE_BYTES": -1}}, "XSM['IDEMPOTENCY']['MAX_RESPONSE_BYTES']"),
        ({"AUDIT": {"ENABLED": "yes"}}, "XSM['AUDIT']['ENABLED']"),
        ({"AUDIT": {"MAXLEN": 0}}, "XSM['AUDIT']['MAXLEN']"),
        ({"AUDIT": {"REDACT": "card"}}, "XSM['AUDIT']['REDACT']"),
        ({"AUDIT": {"REDACT": ["", "x"]}}, "XSM['AUDIT']['REDACT']"),
        ({"TIMERS": {"MAX_ATTEMPTS": 0}}, "XSM['TIMERS']['MAX_ATTEMPTS']"),
        ({"STREAM": "on"}, "XSM['STREAM']"),
        ({"STREAM": {"HEARTBEAT_S": 0}}, "XSM['STREAM']['HEARTBEAT_S']"),
        ({"STREAM": {"HEARTBEAT_S": "15"}}, "XSM['STREAM']['HEARTBEAT_S']"),
        ({"STREAM": {"HEARTBEAT_S": 7200}}, "XSM['STREAM']['HEARTBEAT_S']"),
        ({"STREAM": {"MAX_SECONDS": 0}}, "XSM['STREAM']['MAX_SECONDS']"),
        ({"STREAM": {"MAX_SECONDS": float("inf")}}, "XSM['STREAM']['MAX_SECONDS']"),
        ({"STREAM": {"MAX_CONNECTIONS": 0}}, "XSM['STREAM']['MAX_CONNECTIONS']"),
        ({"STREAM": {"MAX_CONNECTIONS": 10.5}}, "XSM['STREAM']['MAX_CONNECTIONS']"),
        ({"STREAM": {"MAX_CONNECTIONS": None}}, "XSM['STREAM']['MAX_CONNECTIONS']"),
        ({"STREAM": {"PERMISSION": None}}, "XSM['STREAM']['PERMISSION']"),
        ({"STREAM": {"PERMISSION": " "}}, "XSM['STREAM']['PERMISSION']"),
        ({"STREAM": {"PERMISION": "x.y"}}, "XSM['STREAM']['PERMISION']"),
    ],
)
def test_wrong_types_and_values_are_named(settings: Any, value: dict[str, Any], named: str):
    settings.XSM = {"PREFIX": "shop", **value}
    with pytest.raises(ImproperlyConfigured) as info:
        conf.get_settings()
    assert named in str(info.value)


def _deep_tuple(depth: int = 3000) -> Any:
    value: Any = ()
    for _ in range(depth):
        value = (value,)
    return value


@pytest.mark.parametrize(
    "value",
    [
        {_deep_tuple(): 1},
        {10**5000: 1},
        {"IDEMPOTENCY": {_deep_tuple(): 1, -(10**5000): 2}},
        {"MAX_PAYLOAD_BYTES": _deep_tuple()},
        {"LOCK": 10**5000},
    ],
    ids=["deep-tuple-key", "huge-int-key", "nested-keys", "deep-tuple-value", "huge-int-value"],
)
def test_keys_and_values_only_python_can_build_are_named_briefly(
    settings: Any, value: dict[Any, Any]
):
    """repr() and str() of these raise (RecursionError, the int digit
    limit): the problem list shows them bounded instead."""
    settings.XSM = value
    with pytest.raises(conf.InvalidSettings) as info:
        conf.get_settings()
    assert info.value.problems and all(len(p) < 600 for p in info.value.problems)
    assert "((((...),),),)" in str(info.value) or "digits>" in str(info.value)


def test_xsm_must_be_a_dict(settings: Any):
    settings.XSM = ["PREFIX", "shop"]
    with pytest.raises(ImproperlyConfigured, match=r"settings\.XSM must be a dict"):
        conf.get_settings()


def test_methods_are_upper_cased(settings: Any):
    settings.XSM = {"IDEMPOTENCY": {"REQUIRED": ["post", "Patch"]}}
    assert conf.get_settings().idempotency.required == frozenset({"POST", "PATCH"})
    assert conf.get_settings().idempotency.meta_key == "HTTP_IDEMPOTENCY_KEY"


def test_accessor_is_cached_until_the_setting_changes(settings: Any):
    first = conf.get_settings()
    assert conf.get_settings() is first
    settings.XSM = {**settings.XSM, "LOCK": "pessimistic"}
    second = conf.get_settings()
    assert second is not first
    assert second.lock == "pessimistic"


def test_debug_change_resets_too(settings: Any):
    first = conf.get_settings()
    settings.DEBUG = True
    assert conf.get_settings() is not first
    assert conf.get_settings().debug is True


def test_setting_change_rebuilds_the_backend(settings: Any):
    backend = stores.get_backend()
    assert stores.get_backend() is backend
    settings.XSM = {**settings.XSM, "PREFIX": "other"}
    rebuilt = stores.get_backend()
    assert rebuilt is not backend
    assert rebuilt.store.prefix == "other"


def test_unrelated_setting_change_keeps_the_cache(settings: Any):
    first = conf.get_settings()
    settings.TIME_ZONE = "Europe/Paris"
    assert conf.get_settings() is first


def test_on_reset_callbacks_run_once_per_reset():
    calls: list[int] = []

    def callback() -> None:
        calls.append(1)

    conf.on_reset(callback)
    conf.on_reset(callback)  # registering twice is harmless
    try:
        conf.reset()
        assert calls == [1]
    finally:
        conf._reset_callbacks.remove(callback)


@pytest.mark.parametrize(
    ("xsm", "debug", "embedded"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"EMBEDDED": True}, False, True),
        ({"EMBEDDED": False}, True, False),
        ({"REDIS_URL": "redis://h/0"}, True, False),
        ({"CACHE_ALIAS": "default", "EMBEDDED": True}, True, False),
    ],
)
def test_uses_embedded(settings: Any, xsm: dict[str, Any], debug: bool, embedded: bool):
    settings.DEBUG = debug
    settings.XSM = {"PREFIX": "p", **xsm}
    assert conf.get_settings().uses_embedded is embedded


_KEY = "FZPgmwYk3rW0bq1lHn9vE5uQYwX2cTz8dA4sJ6pK7oM="  # a valid Fernet key


@pytest.mark.parametrize(
    ("value", "named", "got"),
    [
        (_KEY, "XSM['CODEC_KEYS']", "got a str"),
        (_KEY.encode(), "XSM['CODEC_KEYS']", "got a bytes"),
        ({"k": _KEY}, "XSM['CODEC_KEYS']", "got a dict"),
        ([], "XSM['CODEC_KEYS']", "got an empty list"),
        ([_KEY, 5], "XSM['CODEC_KEYS'][1]", "got an int"),
        ([_KEY, ""], "XSM['CODEC_KEYS'][1]", "got an empty str"),
    ],
)
def test_codec_keys_problems_name_the_type_never_the_key(value: Any, named: str, got: str):
    with pytest.raises(conf.InvalidSettings) as info:
        conf.parse({"CODEC_KEYS": value}, debug=False)
    [problem] = info.value.problems
    assert problem.startswith(f"{named}: ") and got in problem
    assert _KEY not in problem and _KEY[:6] not in problem


@pytest.mark.parametrize("value", [b"redis://:hunter2@redis.example:6379/0", 12345])
def test_a_redis_url_of_the_wrong_type_is_not_shown(value: Any):
    with pytest.raises(conf.InvalidSettings) as info:
        conf.parse({"REDIS_URL": value}, debug=False)
    [problem] = info.value.problems
    assert problem.startswith("XSM['REDIS_URL']: expected a non-empty string or None, got a")
    assert "hunter2" not in problem and "12345" not in problem


@pytest.mark.parametrize(
    "bad",
    ["short", _KEY[:-4], _KEY.rstrip("="), "é" * 44, "!" * 44],
    ids=["short", "truncated", "unpadded", "not-ascii", "not-base64"],
)
@pytest.mark.parametrize("codec", [None, "django_xsm.persistence.FernetCodec"])
def test_a_key_fernet_refuses_is_a_settings_problem(bad: str, codec: str | None):
    from cryptography.fernet import Fernet

    with pytest.raises(ValueError):
        Fernet(bad)  # what building the codec at the first request would raise
    with pytest.raises(conf.InvalidSettings) as info:
        conf.parse({"CODEC_KEYS": [_KEY, bad], "CODEC": codec}, debug=False)
    [problem] = info.value.problems
    assert problem.startswith("XSM['CODEC_KEYS'][1]: is not a Fernet key: a key is 32 url-safe")
    assert "Fernet.generate_key()" in problem and bad not in problem


def test_keys_of_a_codec_of_your_own_are_not_fernet_checked():
    parsed = conf.parse({"CODEC_KEYS": ["short"], "CODEC": "myapp.codecs.Vault"}, debug=False)
    assert parsed.codec_keys == ("short",)
