"""Every system check id, each triggered on its own."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.core.checks import Error, Warning
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_xsm import checks
from django_xsm.checks import check_deploy, check_settings, detect_request_timeout
from django_xsm.conf import get_settings


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


@pytest.fixture(autouse=True)
def _no_server_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GUNICORN_CMD_ARGS", raising=False)
    monkeypatch.delenv("UWSGI_HARAKIRI", raising=False)


def test_the_test_settings_pass_apart_from_forced_embedded(xsm: Any):
    assert ids(check_settings()) == ["xsm.W004"]
    xsm(EMBEDDED=None)


def test_clean_with_debug_and_embedded_default(settings: Any, xsm: Any):
    settings.DEBUG = True
    xsm(EMBEDDED=None)
    assert check_settings() == []


def test_e001_invalid_settings(xsm: Any):
    xsm(LOCKS="optimistic")
    messages = check_settings()
    assert ids(messages) == ["xsm.E001"]
    assert isinstance(messages[0], Error)
    assert "XSM['LOCKS']" in messages[0].msg


@pytest.mark.parametrize("value", [True, False])
def test_e001_a_removed_setting_says_it_was_removed(xsm: Any, value: bool):
    """A setting that no longer exists is never silently ignored: it is an
    error saying what replaced it, whatever its value."""
    xsm(SPECULATIVE=value)
    messages = check_settings()
    assert ids(messages) == ["xsm.E001"]
    assert messages[0].msg.startswith("Removed setting XSM['SPECULATIVE']: ")
    assert "speculative one-round-trip block was removed" in messages[0].msg
    assert "delete this setting" in messages[0].msg
    assert "Unknown setting" not in messages[0].msg


@pytest.mark.parametrize("prefix", [None, "", "a*b", "x" * 65, "{tag}"])
def test_e002_prefix(xsm: Any, prefix: Any):
    if prefix == "":
        xsm(PREFIX=prefix)
        assert ids(check_settings()) == ["xsm.E001"]  # empty string: a type error
        return
    xsm(PREFIX=prefix)
    assert "xsm.E002" in ids(check_settings())


def test_e003_url_and_alias(xsm: Any, settings: Any):
    settings.CACHES = {
        **settings.CACHES,
        "r": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
            "OPTIONS": {"SOCKET_TIMEOUT": 1, "SOCKET_CONNECT_TIMEOUT": 1},
        },
    }
    xsm(REDIS_URL="redis://127.0.0.1:1/0", CACHE_ALIAS="r", EMBEDDED=None)
    assert ids(check_settings()) == ["xsm.E003"]


@pytest.mark.parametrize(
    "url", ["http://host:6379/0", "localhost:6379", "redis://u:topsecret@host:port/0"]
)
def test_e004_bad_url_without_echoing_it(xsm: Any, url: str):
    xsm(REDIS_URL=url, EMBEDDED=None)
    messages = check_settings()
    assert ids(messages) == ["xsm.E004"]
    assert "topsecret" not in messages[0].msg
    assert "host" not in messages[0].msg


@pytest.mark.parametrize("url", ["redis://h:6379/0", "rediss://h:6380/1", "unix:///tmp/r.sock"])
def test_good_urls_pass(xsm: Any, url: str):
    xsm(REDIS_URL=url, EMBEDDED=None)
    assert check_settings() == []


def test_e005_unknown_alias(xsm: Any):
    xsm(CACHE_ALIAS="nope", EMBEDDED=None)
    messages = check_settings()
    assert ids(messages) == ["xsm.E005"]
    assert "'nope'" in messages[0].msg


def test_e006_non_redis_alias(xsm: Any):
    xsm(CACHE_ALIAS="default", EMBEDDED=None)  # LocMemCache in the test settings
    messages = check_settings()
    assert ids(messages) == ["xsm.E006"]
    assert "LocMemCache" in messages[0].msg


def test_e006_sharded_alias(xsm: Any, settings: Any):
    settings.CACHES = {
        **settings.CACHES,
        "shards": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": ["redis://a:6379/0", "redis://b:6379/0"],
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.ShardClient"},
        },
    }
    xsm(CACHE_ALIAS="shards", EMBEDDED=None)
    messages = check_settings()
    assert ids(messages) == ["xsm.E006"]
    assert "sharded" in messages[0].msg


def test_w005_alias_without_timeouts(xsm: Any, settings: Any):
    settings.CACHES = {
        **settings.CACHES,
        "r": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://h:6379/0"},
    }
    xsm(CACHE_ALIAS="r", EMBEDDED=None)
    messages = check_settings()
    assert ids(messages) == ["xsm.W005"]
    assert isinstance(messages[0], Warning)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("tests.django.nope.machine", "cannot import"),
        ("tests.django.machines.missing", "cannot import"),
        ("tests.django.machines.NOT_A_MACHINE", "not a Machine"),
        ("data/missing.json", "does not exist"),
        ("data/broken.json", "not valid JSON"),
    ],
)
def test_e007_unknown_machine_paths_and_json_files(xsm: Any, spec: str, fragment: str):
    xsm(MACHINES={"ticket": "tests.django.machines.ticket", "bad": spec})
    messages = check_settings()
    assert ids(messages) == ["xsm.W004", "xsm.E007"] or ids(messages) == ["xsm.E007", "xsm.W004"]
    error = next(m for m in messages if m.id == "xsm.E007")
    assert "XSM['MACHINES']['bad']" in error.msg
    assert fragment in error.msg


def test_e008_no_redis_without_debug(xsm: Any, settings: Any):
    settings.DEBUG = False
    xsm(EMBEDDED=None)
    messages = check_settings()
    assert ids(messages) == ["xsm.E008"]
    assert "REDIS_URL" in messages[0].hint


def test_e008_when_embedded_is_switched_off(xsm: Any, settings: Any):
    settings.DEBUG = True
    xsm(EMBEDDED=False)
    assert ids(check_settings()) == ["xsm.E008"]


def test_e009_embedded_needs_fakeredis_and_lupa(
    xsm: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "lupa" else real(name, *a),
    )
    settings.DEBUG = True
    xsm(EMBEDDED=None)
    messages = check_settings()
    assert ids(messages) == ["xsm.E009"]
    assert "lupa" in messages[0].msg


@pytest.mark.parametrize(
    "change",
    [
        {"ACTOR": "tests.django.nope.actor"},
        {"ACTOR": "tests.django.machines.NOT_A_MACHINE"},
        {"IDEMPOTENCY": {"PRINCIPAL": "tests.django.machines.nothing"}},
        {"CODEC": "django_xsm.persistence.NoSuchCodec"},
        {"STREAM": {"PERMISSION": "tests.stream.permissions.nothing"}},
        {"STREAM": {"PERMISSION": "tests.stream.permissions.NOT_CALLABLE"}},
        {"STREAM": {"PERMISSION": "a..b"}},
    ],
)
def test_e010_callable_paths(xsm: Any, change: dict[str, Any]):
    xsm(**change)
    assert "xsm.E010" in ids(check_settings())


def test_w001_lock_ttl_shorter_than_gunicorn_timeout(xsm: Any, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GUNICORN_CMD_ARGS", "--workers 3 --timeout 60")
    xsm(LOCK_TTL_MS=30_000)
    messages = check_settings()
    assert "xsm.W001" in ids(messages)
    warning = next(m for m in messages if m.id == "xsm.W001")
    assert "60 s, from GUNICORN_CMD_ARGS --timeout" in warning.msg
    xsm(LOCK_TTL_MS=90_000)
    assert "xsm.W001" not in ids(check_settings())


@pytest.mark.parametrize(
    ("env", "value", "found"),
    [
        ({"GUNICORN_CMD_ARGS": "-t 45"}, None, (45.0, "GUNICORN_CMD_ARGS --timeout")),
        ({"GUNICORN_CMD_ARGS": "--timeout=90 -w 2"}, None, (90.0, "GUNICORN_CMD_ARGS --timeout")),
        ({"GUNICORN_CMD_ARGS": "--timeout 0"}, None, None),  # 0 disables it
        ({"UWSGI_HARAKIRI": "120"}, None, (120.0, "UWSGI_HARAKIRI")),
        ({"GUNICORN_CMD_ARGS": "-t 45"}, 10, (10.0, "XSM['REQUEST_TIMEOUT_S']")),
        ({}, None, None),
    ],
)
def test_request_timeout_detection(
    xsm: Any, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], value: Any, found: Any
):
    for name, text in env.items():
        monkeypatch.setenv(name, text)
    xsm(REQUEST_TIMEOUT_S=value)
    assert detect_request_timeout(get_settings()) == found


def test_w002_lease_shorter_than_request_timeout(xsm: Any):
    xsm(REQUEST_TIMEOUT_S=20, LOCK_TTL_MS=60_000, IDEMPOTENCY={"LEASE_S": 10})
    assert ids(check_settings()) == ["xsm.W004", "xsm.W002"]


def test_w003_no_machines(xsm: Any):
    xsm(MACHINES={})
    assert ids(check_settings()) == ["xsm.W004", "xsm.W003"]


def test_w004_forced_embedded_without_debug(xsm: Any, settings: Any):
    settings.DEBUG = False
    xsm(EMBEDDED=True)
    messages = check_settings()
    assert ids(messages) == ["xsm.W004"]
    assert isinstance(messages[0], Warning)


@pytest.mark.parametrize(
    ("url", "warned"),
    [
        ("redis://cache.internal:6379/0", True),
        ("redis://127.0.0.1:6379/0", False),
        ("redis://localhost:6379/0", False),
        ("rediss://cache.internal:6380/0", False),
        ("unix:///run/redis.sock", False),
    ],
)
def test_w010_plaintext_remote_redis_on_deploy(
    xsm: Any, url: str, warned: bool, monkeypatch: pytest.MonkeyPatch
):
    # W010 reads the URL only; the persistence question (W012) would ask the
    # server, and these hosts are not ours to contact
    monkeypatch.setattr(checks, "_persistence", list)
    xsm(REDIS_URL=url, EMBEDDED=None)
    assert ids(check_deploy()) == (["xsm.W010"] if warned else [])


def test_w011_embedded_store_on_deploy(xsm: Any, settings: Any):
    settings.DEBUG = True
    xsm(EMBEDDED=None)
    assert ids(check_deploy()) == ["xsm.W011"]


def test_checks_run_through_manage_py_check(xsm: Any):
    xsm(PREFIX=None)
    with pytest.raises(SystemCheckError, match=r"xsm\.E002"):
        call_command("check", tags=["xsm"])
    xsm(REDIS_URL="redis://cache.internal:6379/0", EMBEDDED=None, PREFIX="shop")
    call_command("check", tags=["xsm"])  # no error
    with pytest.raises(SystemCheckError, match=r"xsm\.W010"):
        call_command("check", tags=["xsm"], deploy=True, fail_level="WARNING")


def test_every_settings_problem_is_reported_at_once(settings: Any):
    settings.XSM = {
        "PREFIX": "shop",
        "PREFX": "typo",
        "LOCK": "mutex",
        "LOCK_TIMEOUT_S": 10**400,
        "IDEMPOTENCY": {"REQUIRED": [[]], "TTL_S": float("nan")},
    }
    errors = [e for e in check_settings() if e.id == "xsm.E001"]
    text = "\n".join(e.msg for e in errors)
    assert len(errors) == 5, text
    for named in ("'PREFX'", "XSM['LOCK']", "XSM['LOCK_TIMEOUT_S']", "['REQUIRED']", "['TTL_S']"):
        assert named in text
    assert len(text) < 2000  # 10**400 is not printed in full


@pytest.mark.parametrize("actor", [".", "..", "a..b", "x" * 10_000])
def test_a_path_that_is_not_importable_is_an_error_not_a_crash(xsm: Any, actor: str):
    xsm(ACTOR=actor)
    [error] = [e for e in check_settings() if e.id == "xsm.E010"]
    assert "XSM['ACTOR']: cannot import" in error.msg and len(error.msg) < 1000


def test_a_huge_request_timeout_is_refused_clearly(xsm: Any):
    xsm(REQUEST_TIMEOUT_S=1e300)
    [error] = [e for e in check_settings() if e.id == "xsm.E001"]
    assert "XSM['REQUEST_TIMEOUT_S']" in error.msg


@pytest.mark.live
def test_deploy_warns_when_the_server_keeps_nothing_on_disk(xsm: Any, live_url: str):
    import redis

    client = redis.Redis.from_url(live_url)
    config = {**client.config_get("appendonly"), **client.config_get("save")}
    keeps_nothing = config.get("appendonly") == "no" and not str(config.get("save", "")).strip()
    client.close()
    xsm(REDIS_URL=live_url, EMBEDDED=None)
    ids = [m.id for m in check_deploy()]
    assert ("xsm.W012" in ids) == keeps_nothing


def test_deploy_check_skips_the_persistence_question_when_redis_is_down(xsm: Any):
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.2)
    assert "xsm.W012" not in [m.id for m in check_deploy()]


@pytest.fixture
def wrong_password(xsm: Any) -> Any:
    """XSM points at a private redis-server with the wrong password."""
    from tests.redis.servers import REDIS_SERVER, RedisServer, wait_until

    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.skip(f"{REDIS_SERVER} is not installed")
    server = RedisServer(extra=["--requirepass", "right-one"]).start(wait=False)
    try:
        wait_until(server.client(password="right-one").ping, timeout=10, what="the server")
        xsm(REDIS_URL=f"redis://:wrong-one@127.0.0.1:{server.port}/0", EMBEDDED=None)
        yield server
    finally:
        server.cleanup()


@pytest.mark.fault
def test_deploy_reports_refused_credentials_as_an_error(wrong_password: Any):
    """A wrong password is a configuration error (no retry fixes it), found
    at start-up by check --deploy when the server answers."""
    [error] = [m for m in check_deploy() if m.id == "xsm.E011"]
    assert "refused" in error.msg and "wrong-one" not in error.msg + (error.hint or "")
    assert str(wrong_password.port) not in error.msg


@pytest.mark.fault
def test_readiness_says_configuration_when_redis_refuses_the_credentials(
    wrong_password: Any, client: Any, xsm: Any
):
    response = client.get("/_xsm/ready")
    assert response.status_code == 503
    assert response.json()["reason"] == "configuration"
    # no password at all is NOAUTH, refused the same way
    xsm(REDIS_URL=f"redis://127.0.0.1:{wrong_password.port}/0", EMBEDDED=None)
    assert client.get("/_xsm/ready").json()["reason"] == "configuration"


def guard_bump(xsm: Any, rules: Any) -> None:
    spec = {"CONFIG": "tests.django.machines.ticket", "PERMISSIONS": {"BUMP": rules}}
    xsm(MACHINES={"ticket": spec})


@pytest.mark.parametrize(
    ("rule", "hint"),
    [
        ("orders.nonexistent_perm", "no model of app 'orders' declares it"),
        ("orders.perms", "no model of app 'orders' declares it"),
        ("shop.refund_order", "no installed app is labelled 'shop'"),
    ],
)
def test_w006_a_permission_no_model_declares(xsm: Any, rule: str, hint: str):
    guard_bump(xsm, ["orders.ship_order", rule])
    (warning,) = [m for m in check_settings() if m.id == "xsm.W006"]
    assert isinstance(warning, Warning)
    assert warning.msg == (
        f"XSM['MACHINES']['ticket'] PERMISSIONS['BUMP']: {rule!r} names no permission an "
        "installed model declares, so only superusers pass it"
    )
    assert warning.hint.startswith(hint) and "'orders.perms.owns_order'" in warning.hint


def test_w006_knows_default_and_declared_permissions_without_the_database(xsm: Any):
    """Meta.permissions, the default add/change/delete/view of any model
    (auth's own, an unmanaged one) and a check (a callable) pass; no
    database is asked (the test has no django_db mark: a query would fail)."""
    guard_bump(
        xsm,
        [
            "orders.ship_order",
            "orders.change_order",
            "auth.view_user",
            "django_xsm.redrive_outbox",
            "django_xsm.view_instance",
            "tests.fieldapp.permissions.small_orders",
        ],
    )
    assert ids(check_settings()) == ["xsm.W004"]
    guard_bump(xsm, "django_xsm.add_instance")  # Instance declares "view" only
    assert ids(check_settings()) == ["xsm.W004", "xsm.W006"]
