"""What does django-xsm add to a request's CPU, next to the wire's own cost?

In one process, on a real Redis, through Django's test client (the
settings of ``tests/django``: sessions, auth and messages middleware; the
``XSM`` defaults, with only ``PREFIX``, ``REDIS_URL`` and the ``ticket``
machine set), the client's CPU (``time.process_time``) per request of:

* ``decorated`` — ``POST /t/<new id>/bump`` with an ``Idempotency-Key``:
  ``@stateful_view("ticket", key="ticket:{tid}")`` sending ``BUMP`` (a new
  key each time; the default optimistic lock, audit on, the key claimed at
  open: two round trips), behind the whole middleware stack;
* ``plain`` — ``POST /t/<new id>/plain`` with the same header and a JSON
  answer of the same shape, from a plain Django view, behind the same
  middleware stack without ``XsmMiddleware``: Django without django-xsm;
* ``plain+mw`` — the plain view behind ``XsmMiddleware`` (for reference:
  what the middleware alone costs);
* ``2 GETs`` — two plain ``GET`` round trips on django-xsm's own Redis
  client (the same connection pool, parser and server).

Rounds alternate the order of the series (drift on a shared machine hits
all of them); each round gives ``(decorated - plain) / 2 GETs`` and the
figure is the median of the rounds. The storage redesign's target is at
most 3x.

Usage (from the repository root)::

    python bench/cpu_budget.py --redis-url redis://127.0.0.1:6379/15
    python bench/cpu_budget.py --rounds 9 --number 300 --json cpu-budget.json

Without ``--redis-url`` it uses ``XSM_REDIS_URL``, else starts a
throw-away ``redis-server`` on a free loopback port (stopped at exit). On a
shared server it writes under a fresh prefix and deletes exactly those
keys at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
XSM_MIDDLEWARE = "django_xsm.middleware.XsmMiddleware"
SERIES = ("decorated", "plain", "plain+mw", "2 GETs")

#: filled by _routes() once Django is set up (this module is the URLconf)
urlpatterns: list[Any] = []


def _routes() -> list[Any]:
    from django.http import HttpRequest, JsonResponse
    from django.urls import path

    from django_xsm.decorators import stateful_view

    def plain(request: HttpRequest, tid: str) -> JsonResponse:
        return JsonResponse({"state": "open", "count": 1, "key": f"ticket:{tid}"}, status=201)

    @stateful_view("ticket", key="ticket:{tid}")
    def bump(request: HttpRequest, tid: str, *, instance: Any) -> JsonResponse:
        instance.send("BUMP")
        body = {"state": instance.value, "count": instance.context["count"], "key": instance.key}
        return JsonResponse(body, status=201)

    return [path("t/<slug:tid>/plain", plain), path("t/<slug:tid>/bump", bump)]


def _setup_django(redis_url: str, prefix: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django.settings"
    from tests.django import settings

    settings.XSM = {
        "PREFIX": prefix,
        "REDIS_URL": redis_url,
        "EMBEDDED": False,
        "MACHINES": {"ticket": "tests.django.machines.ticket"},
    }
    settings.ROOT_URLCONF = __name__
    settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    import django

    django.setup()
    from django.core.management import call_command

    urlpatterns[:] = _routes()
    call_command("migrate", run_syncdb=True, verbosity=0)


def _clients() -> dict[str, Any]:
    """A test client per middleware stack: with and without XsmMiddleware."""
    from django.conf import settings
    from django.test import Client
    from django.test.utils import override_settings

    with_xsm = Client()
    without = Client()
    stack = [m for m in settings.MIDDLEWARE if m != XSM_MIDDLEWARE]
    assert len(stack) == len(settings.MIDDLEWARE) - 1, settings.MIDDLEWARE
    with override_settings(MIDDLEWARE=stack):
        without.handler.load_middleware()  # the chain is built once, here
    return {"with_xsm": with_xsm, "without": without}


def _series(prefix: str) -> dict[str, Callable[[str], None]]:
    from django_xsm.backend import get_backend

    clients = _clients()
    redis = get_backend().client
    a, b = f"{prefix}:a", f"{prefix}:b"

    def post(client: Any, route: str) -> Callable[[str], None]:
        def one(tag: str) -> None:
            response = client.post(f"/t/{tag}/{route}", HTTP_IDEMPOTENCY_KEY=f"i{tag}")
            if response.status_code != 201:
                raise SystemExit(f"{route}: HTTP {response.status_code} {response.content!r}")

        return one

    def gets(tag: str) -> None:
        redis.get(a)
        redis.get(b)

    return {
        "decorated": post(clients["with_xsm"], "bump"),
        "plain": post(clients["without"], "plain"),
        "plain+mw": post(clients["with_xsm"], "plain"),
        "2 GETs": gets,
    }


def _check_audited_and_idempotent(run: Callable[[str], None]) -> None:
    """The decorated request is what the figure says: audited, keyed."""
    from django_xsm.registry import machines

    run("probe")
    record = machines["ticket"].objects.history("ticket:probe")[0]
    if record.idempotency_key != "iprobe":
        raise SystemExit(f"the decorated request was not keyed and audited: {record!r}")


def measure(rounds: int, number: int, warmup: int, prefix: str) -> list[dict[str, float]]:
    """One row per round: client CPU µs per request of each series."""
    series = _series(prefix)
    _check_audited_and_idempotent(series["decorated"])
    for name, run in series.items():
        for i in range(warmup):
            run(f"w{SERIES.index(name)}x{i}")
    rows = []
    for r in range(rounds):
        order = list(SERIES[r % len(SERIES) :] + SERIES[: r % len(SERIES)])
        if r % 2:
            order.reverse()
        row: dict[str, float] = {}
        for name in order:
            run = series[name]
            tags = [f"r{r}s{SERIES.index(name)}x{i}" for i in range(number)]
            started = time.process_time()
            for tag in tags:
                run(tag)
            row[name] = (time.process_time() - started) / number * 1e6
        row["added"] = row["decorated"] - row["plain"]
        row["ratio"] = row["added"] / row["2 GETs"]
        rows.append(row)
    return rows


@contextlib.contextmanager
def _redis(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from bench.model_field import redis_server  # XSM_REDIS_URL, else a throw-away server

    with redis_server() as found:
        yield found


def _delete_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis-url", default=os.environ.get("XSM_REDIS_URL"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=200, help="requests per series and round")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--json", help="write the rounds and medians to this file")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    prefix = f"cpubudget{uuid.uuid4().hex[:8]}"
    with _redis(a.redis_url) as url:
        _setup_django(url, prefix)
        try:
            rows = measure(a.rounds, a.number, a.warmup, prefix)
        finally:
            _delete_prefix(url, prefix)
    median = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
    print(f"client CPU µs per request, {a.rounds} rounds of {a.number} (median, per round)")
    for name in (*SERIES, "added"):
        per_round = " ".join(f"{row[name]:.0f}" for row in rows)
        print(f"  {name:10} {median[name]:7.0f}   ({per_round})")
    ratios = " ".join(f"{row['ratio']:.1f}" for row in rows)
    print(f"  (decorated - plain) / 2 GETs: {median['ratio']:.1f}x   ({ratios})   target <= 3x")
    if a.json:
        import django_xsm

        report = {
            "django_xsm": django_xsm.__version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "load_average": os.getloadavg(),
            "rounds": rows,
            "median": median,
        }
        Path(a.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
