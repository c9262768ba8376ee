"""Four processes send to one row on PostgreSQL and a live Redis: no update
is lost, no idempotency key applies twice, and the row's version ends
equal to the Redis version."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from django_xsm import backend as xsm_backend
from tests.django.databases import require_postgres
from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp.models import Order
from tests.support import LIVE_URL, delete_namespace, live_only

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES, transaction=True),
    pytest.mark.timeout(180),
]

ROOT = Path(__file__).resolve().parents[3]
WORKERS = 4
PER_WORKER = 30
OVERLAP = 10  # each worker also sends the next worker's first 10 keys


@live_only
@pytest.mark.live
def test_four_processes_lose_no_update_and_apply_no_key_twice(xsm: Any) -> None:
    if "postgres" not in settings.DATABASES:
        if require_postgres():
            pytest.fail("XSM_REQUIRE_PG=1 but no PostgreSQL answers")
        pytest.skip("processes share a database only on PostgreSQL")
    alias = "postgres"
    prefix = f"xsmtest-{uuid.uuid4().hex[:12]}"
    xsm(REDIS_URL=LIVE_URL, PREFIX=prefix, EMBEDDED=None)
    found = xsm_backend.get_backend()
    try:
        _run_workers(found, prefix, alias)
    finally:
        delete_namespace(found.client, prefix)


def _run_workers(backend: Any, prefix: str, alias: str) -> None:
    order = Order.objects.using(alias).create()  # its instance is created (v1) right away
    assert row_in_db(Order, order.pk, alias) == ("cart", 1)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.django.commands.live_settings",
        "XSM_TEST_PREFIX": prefix,
        "XSM_REDIS_URL": LIVE_URL,
        "XSM_TEST_PG_NAME": connections[alias].settings_dict["NAME"],
        "PYTHONPATH": str(ROOT),
    }
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.django.fields.concurrent_worker",
                str(order.pk),
                str(w * PER_WORKER),
                str(PER_WORKER + OVERLAP),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=150)
        assert proc.returncode == 0 and "done" in out, err
    distinct = WORKERS * PER_WORKER + OVERLAP  # the last worker's overlap is its own
    record = backend.store.load(f"shop:{order.pk}")
    assert record.snapshot["context"]["items"] == distinct  # each key applied exactly once
    assert record.version == 1 + distinct  # the creation, then one commit per applied event
    assert len(order.status.history()) == distinct
    assert row_in_db(Order, order.pk, alias) == ("cart", record.version)
