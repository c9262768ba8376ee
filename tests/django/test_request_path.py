"""How deep the request path is when ``COMMIT`` is sent: the django-xsm
frames live at that moment for a decorated, idempotent, audited POST
(``bench/request_path.py`` measures them; docs/benchmarks.md, "Baseline
before the storage redesign"). A structural bound, not a timing: it fails
when a change adds a layer between the view and the wire. Each test sends
one request, on fakeredis and on the live server."""

from __future__ import annotations

from typing import Any

import pytest

from bench.request_path import CommitPath, aprobe, probe
from tests.django.conftest import key_header
from tests.fieldapp.models import Order

#: django-xsm frames live at ``EVALSHA COMMIT`` once a block runs in one
#: loop of its store's driver (16, 17 and 15 before the storage redesign;
#: docs/benchmarks.md, "One driver loop"); a change may lower these, never
#: raise them.
MAX_FRAMES = {"key": 8, "model": 9, "async": 8}


def _check(path: CommitPath, bound: int) -> None:
    assert path.status in (200, 201), path
    assert path.loops == 1, path  # one driver loop: the block's generators, waiting
    assert path.count <= bound, "\n".join(str(f) for f in path.frames)


def test_a_key_based_view_commits_within_the_frame_bound(client: Any, backend: Any) -> None:
    path = probe("key", lambda: client.post("/t/depth1/bump", **key_header("d1")))
    _check(path, MAX_FRAMES["key"])
    assert path.frames[0].module == "middleware.py"


@pytest.mark.django_db
@pytest.mark.urls("tests.django.fields.urls")
def test_a_model_bound_view_commits_within_the_frame_bound(client: Any, backend: Any) -> None:
    order = Order.objects.create()
    path = probe(
        "model",
        lambda: client.post(f"/orders/{order.pk}/pay", {"amount": "20"}, **key_header("d2")),
    )
    _check(path, MAX_FRAMES["model"])


async def test_an_async_view_commits_within_the_frame_bound(
    async_client: Any, backend: Any
) -> None:
    path = await aprobe(
        "async", lambda: async_client.post("/t/depth3/abump", headers={"Idempotency-Key": "d3"})
    )
    _check(path, MAX_FRAMES["async"])


def test_a_request_that_sends_no_commit_is_reported(client: Any, backend: Any) -> None:
    from bench.request_path import ProbeError

    with pytest.raises(ProbeError, match="sent no COMMIT"):
        probe("read", lambda: client.get("/t/depth4/show"))
