"""django-xsm runs as a Redis ACL user allowed only the commands of
``django_xsm.redis.acl.COMMANDS`` on its own namespace's keys: a commit
with an idempotent replay, a timer scan, an outbox delivery, a log read
and a re-encryption pass, on the live server."""

from __future__ import annotations

import glob
import io
import re
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from cryptography.fernet import Fernet
from django.core.management import call_command

from django_xsm import backend as stores
from django_xsm.backend.build import get_outbox, get_scanner
from django_xsm.outbox import HandlerTable
from django_xsm.redis.acl import COMMANDS, acl_setuser
from django_xsm.registry import machines
from tests.django.outbox.conftest import Recorder
from tests.django.outbox.conftest import worker as make_worker
from tests.support import delete_namespace


def test_the_list_names_every_command_the_scripts_call() -> None:
    called: set[str] = set()
    for name in glob.glob("django_xsm/redis/scripts/*.py"):
        with open(name) as f:
            called |= {c.lower() for c in re.findall(r"redis\.p?call\(\s*'(\w+)'", f.read())}
    assert called, "no script found"
    assert called - set(COMMANDS) == set()


def _as_user(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}:{parts.port or 6379}"))


def test_the_main_paths_run_as_a_user_allowed_only_the_listed_commands(
    live_url: str, xsm: Any
) -> None:
    admin = redis.Redis.from_url(live_url)
    user, password = f"xsmtest-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    prefix = f"xsmtest-{uuid.uuid4().hex[:12]}"
    admin.execute_command("ACL", "SETUSER", *acl_setuser(user, password, prefix, select=True))
    try:
        xsm(
            REDIS_URL=_as_user(live_url, user, password),
            PREFIX=prefix,
            EMBEDDED=None,
            CODEC_KEYS=[Fernet.generate_key().decode()],
        )
        found = stores.get_backend()
        # the user really is restricted: another namespace's keys are refused
        with pytest.raises(redis.exceptions.NoPermissionError):
            found.client.get("{someone-else}:schema")
        ticket = machines["ticket"].objects
        first = ticket.send("ticket:1", "BUMP", create=True, idempotency_key="k1")
        again = ticket.send("ticket:1", "BUMP", idempotency_key="k1")
        assert first.accepted and again.duplicate
        fired = get_scanner().scan(found.store.clock() + 120_000)
        assert fired.fired == 1
        assert found.store.load("ticket:1").snapshot["value"] == "stale"
        machines["shipment"].objects.send("shipment:1", "PAY", create=True)
        w, _ = make_worker(Recorder(0.0))
        w.handlers = HandlerTable({"order.paid": lambda event, *, delivery: None})
        assert w.run_batch().delivered == 1
        assert get_outbox().stats()["pending"] == 0
        records = found.log.read("ticket:1")
        assert [r.event_type for r in records][:1] == ["BUMP"]
        out = io.StringIO()
        call_command("xsm_reencrypt", stdout=out)
        assert "0 busy" in out.getvalue()
    finally:
        admin.execute_command("ACL", "DELUSER", user)
        delete_namespace(admin, prefix)
        admin.close()
