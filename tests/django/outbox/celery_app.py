"""The Celery app of the end-to-end test: a real worker process runs it on
the machine's RabbitMQ, results come back over ``rpc://``.

The queue is per test session (``XSM_CELERY_QUEUE``, set before this module
is imported, in the test process and in the worker's environment alike), so
a run never picks up another run's messages. ``RUNS`` counts executions per
task id inside the worker; the ``xsmtest.runs`` task reports it.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from celery import Celery

BROKER = os.environ.get("XSM_CELERY_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
QUEUE = os.environ.get("XSM_CELERY_QUEUE", "xsmtest")

app = Celery("xsmtest", broker=BROKER, backend="rpc://")
app.conf.update(
    task_default_queue=QUEUE,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
    # the handler returns once RabbitMQ confirmed the message
    broker_transport_options={"confirm_publish": True},
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
)

RUNS: Counter[str] = Counter()


def _charge(task: Any, event: dict[str, Any], *, delivery: dict[str, Any]) -> dict[str, Any]:
    RUNS[task.request.id] += 1
    return {"task_id": task.request.id, "event": event, "delivery": delivery}


charge = app.task(name="xsmtest.charge", bind=True)(_charge)
# what django_xsm.outbox.celery.forward sends a "note.celery" event to
note = app.task(name="note.celery", bind=True)(_charge)


@app.task(name="xsmtest.runs")
def runs() -> dict[str, int]:
    return dict(RUNS)
