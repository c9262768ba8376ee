"""Forwarding to Celery, end to end: the outbox worker hands the event to a
real Celery worker process on the machine's RabbitMQ; the task runs once,
with ``task_id == delivery_id`` and the event. Skipped (with the reason)
when RabbitMQ or Celery is missing, except under CI (``CI=true``), where
that is a failure."""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_xsm.backend.build import get_outbox
from django_xsm.outbox import Delivery
from django_xsm.outbox.celery import delivery_kwargs, forwarder
from django_xsm.registry import machines
from tests.django.outbox import handlers
from tests.django.outbox.conftest import run

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[3]
RABBIT = ("127.0.0.1", 5672)


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; CI runs the Celery end-to-end test and needs it")
    pytest.skip(why)


class _Sent:
    """A stand-in app that keeps what ``send_task`` was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, **kwargs: Any) -> str:
        self.calls.append((name, kwargs))
        return "sent"


def test_a_forwarder_sends_the_event_with_the_delivery_id_as_task_id() -> None:
    app = _Sent()
    handler = forwarder("shop.tasks.charge", app=app, queue="payments")
    delivery = Delivery("c1-0", "order:1", "order", 3, 2)
    assert handler({"type": "order.paid", "amount": 7}, delivery=delivery) == "sent"
    assert app.calls == [
        (
            "shop.tasks.charge",
            {
                "args": [{"type": "order.paid", "amount": 7}],
                "kwargs": {"delivery": delivery_kwargs(delivery)},
                "task_id": "c1-0",
                "queue": "payments",
            },
        )
    ]
    assert delivery_kwargs(delivery) == {
        "delivery_id": "c1-0",
        "key": "order:1",
        "machine": "order",
        "version": 3,
        "attempt": 2,
    }
    with pytest.raises(ImproperlyConfigured, match=r"forwarder\(\) needs the task's name"):
        forwarder("")


def test_importing_the_outbox_never_imports_celery() -> None:
    code = (
        "import sys, django; django.setup(); "
        "import django_xsm.outbox, django_xsm.outbox.celery, django_xsm.checks; "
        "print('celery' in sys.modules)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.django.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True
    )
    assert done.stdout.strip() == "False", done.stderr


@pytest.fixture(scope="module")
def celery_worker() -> Iterator[Any]:
    """A Celery worker process on RabbitMQ with this run's own queue; the
    test process's app (``tests.django.outbox.celery_app``) on the same
    queue. Stopped by its pid."""
    try:
        socket.create_connection(RABBIT, timeout=2).close()
    except OSError:
        _missing("RabbitMQ is not reachable on 127.0.0.1:5672")
    if importlib.util.find_spec("celery") is None:
        _missing("Celery is not installed (pip install 'django-xsm[celery]')")
    queue = os.environ.setdefault("XSM_CELERY_QUEUE", f"xsmtest-{uuid.uuid4().hex[:12]}")
    module = importlib.import_module("tests.django.outbox.celery_app")
    module.app.set_current()
    env = {**os.environ, "XSM_CELERY_QUEUE": module.QUEUE, "PYTHONPATH": str(ROOT)}
    # The worker needs no Django: without the variable Celery's Django fixup stays off.
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "celery", "-A", "tests.django.outbox.celery_app", "worker",
            "--pool", "solo", "--queues", module.QUEUE, "--hostname", f"{queue}@%h",
            # (with AMQP heartbeats a warm shutdown takes ~2 s, without them ~8 s)
            "--without-gossip", "--without-mingle", "--loglevel", "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        yield module, lines
    finally:
        proc.send_signal(signal.SIGTERM)  # warm shutdown: the task in hand finishes
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        reader.join(timeout=5)
        with module.app.connection_for_write() as conn:
            conn.default_channel.queue_delete(module.QUEUE)
        module.app.close()


def _result(module: Any, lines: list[str], task_id: str) -> Any:
    """The task's result; on a timeout, the failure shows what the worker said."""
    try:
        return module.app.AsyncResult(task_id).get(timeout=60)
    except Exception as exc:  # celery.exceptions.TimeoutError, a broker error
        pytest.fail(f"no result for {task_id}: {exc!r}; the worker said:\n" + "\n".join(lines))


def _runs(module: Any, lines: list[str]) -> dict[str, int]:
    # FIFO on one queue and a solo pool: this runs after anything sent before it
    probe = module.app.send_task("xsmtest.runs")
    found: dict[str, int] = _result(module, lines, probe.id)
    return found


def test_a_forwarder_runs_the_celery_task_once_with_the_delivery_id(
    backend: Any, outbox_settings: Any, celery_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, lines = celery_worker
    monkeypatch.setattr(handlers, "charge", forwarder("xsmtest.charge", app=module.app))
    outbox_settings(HANDLERS={"order.paid": "tests.django.outbox.handlers.charge"})
    machines["shipment"].objects.send("shipment:1", "PAY", create=True)
    ((entry, _who, _idle),) = get_outbox().pending()
    assert run("xsm_run_outbox", "--once").out.startswith("taken=1 delivered=1 ")
    result = _result(module, lines, entry.delivery_id)
    assert result == {
        "task_id": entry.delivery_id,
        "event": {"type": "order.paid", "amount": 7, "card_number": "4111"},
        "delivery": {
            "delivery_id": entry.delivery_id,
            "key": "shipment:1",
            "machine": "shipment",
            "version": 1,
            "attempt": 1,
        },
    }
    assert _runs(module, lines)[entry.delivery_id] == 1, "\n".join(lines)
    assert get_outbox().stats()["pending"] == 0


def test_forward_sends_to_the_task_named_by_the_event_type(
    backend: Any, outbox_settings: Any, celery_worker: Any
) -> None:
    module, lines = celery_worker
    outbox_settings(HANDLERS={"note.*": "django_xsm.outbox.celery.forward"})
    machines["shipment"].objects.send("shipment:2", "NOTE", kind="celery", text="hi", create=True)
    ((entry, _who, _idle),) = get_outbox().pending()
    assert run("xsm_run_outbox", "--once").out.startswith("taken=1 delivered=1 ")
    result = _result(module, lines, entry.delivery_id)
    assert result["task_id"] == entry.delivery_id
    assert result["event"] == {"type": "note.celery", "text": "hi"}
    assert _runs(module, lines)[entry.delivery_id] == 1, "\n".join(lines)
