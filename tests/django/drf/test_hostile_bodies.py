"""Property-based: ``POST /api/orders/{pk}/events/`` never answers a 500 to a
hostile body (issue 21). Nested deep (past the engine's 100 levels, and past
what Python 3.11's json parser reads: a RecursionError inside DRF), larger
than ``DATA_UPLOAD_MAX_MEMORY_SIZE`` or ``XSM['MAX_PAYLOAD_BYTES']``, or with a
``type`` of any JSON value: a success or a 4xx problem document, a refusal
writes nothing (no instance, no log record, the row untouched), and nothing
is logged at ERROR. On SQLite and PostgreSQL, fakeredis and live."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.django.drf.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.django.test_http_fuzz import (
    BODY_LIMIT,
    FUZZ,
    TYPES,
    assert_no_error_logged,
    nested_lists,
)
from tests.fieldapp.models import Order

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.drf.urls"),
    pytest.mark.usefixtures("views_db"),
]

PROBLEM = "application/problem+json"


def _post(client: Any, alias: str, raw: str) -> tuple[Any, Order]:
    row = Order.objects.using(alias).create(total=1)
    response = client.post(
        f"/api/orders/{row.pk}/events/",
        data=raw,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex,
    )
    return response, row


def assert_refused_cleanly(response: Any, row: Order, alias: str, caplog: Any) -> dict[str, Any]:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"] == PROBLEM, response["Content-Type"]
    body: dict[str, Any] = json.loads(response.content)
    assert body["status"] == response.status_code and body["detail"]
    from django_xsm.registry import machines

    assert not machines["shop"].objects.exists(f"shop:{row.pk}")
    assert row_in_db(Order, row.pk, alias) == ("cart", 0)
    assert_no_error_logged(caplog)
    return body


@FUZZ
@given(depth=st.integers(min_value=1, max_value=2500))
@example(depth=99)
@example(depth=100)
@example(depth=950)  # DRF's parser: RecursionError on Python 3.11 and 3.12
@example(depth=2000)
def test_a_deep_body_is_a_4xx_problem_never_a_500(
    client: Any, backend: Any, alias: str, caplog: Any, depth: int
) -> None:
    caplog.clear()
    response, row = _post(client, alias, '{"type": "ADD", "d": ' + nested_lists(depth) + "}")
    if depth <= 99:
        assert response.status_code == 200, response.content[:300]
        return
    body = assert_refused_cleanly(response, row, alias, caplog)
    assert response.status_code == 422 and body["type"].endswith("/unstorable-value")
    assert "nested more than 100 levels" in body["detail"]


@FUZZ
@given(size=st.integers(min_value=0, max_value=BODY_LIMIT + 20_000))
@example(size=65536 - 11)
@example(size=65536 - 10)
@example(size=BODY_LIMIT)
def test_a_large_body_is_a_413_problem_never_a_500(
    client: Any, backend: Any, alias: str, caplog: Any, settings: Any, size: int
) -> None:
    caplog.clear()
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = BODY_LIMIT
    raw = json.dumps({"type": "ADD", "text": "a" * size})
    payload_bytes = len(json.dumps({"text": "a" * size}, separators=(",", ":")))
    response, row = _post(client, alias, raw)
    if len(raw) <= BODY_LIMIT and payload_bytes <= 65536:
        assert response.status_code == 200, response.content[:300]
        return
    body = assert_refused_cleanly(response, row, alias, caplog)
    assert response.status_code == 413 and body["type"].endswith("/payload-too-large")
    assert body["max_bytes"] == (BODY_LIMIT if len(raw) > BODY_LIMIT else 65536)


@FUZZ
@given(etype=TYPES, with_type=st.booleans())
@example(etype=None, with_type=False)
@example(etype=None, with_type=True)
@example(etype="", with_type=True)
@example(etype=42, with_type=True)
@example(etype="\ud800", with_type=True)
def test_any_type_is_a_success_or_a_4xx_problem(
    client: Any, backend: Any, alias: str, caplog: Any, etype: Any, with_type: bool
) -> None:
    caplog.clear()
    raw = json.dumps({"type": etype, "n": 1} if with_type else {"n": 1})
    response, row = _post(client, alias, raw)
    if response.status_code == 200:
        assert etype in ("ADD", "PAY_ANYWAY")
        return
    assert_refused_cleanly(response, row, alias, caplog)


def test_a_5_mb_body_is_a_413_problem_and_writes_nothing(
    client: Any, backend: Any, alias: str, caplog: Any
) -> None:
    """Django's own limit (2.5 MB): the endpoint hashes the body for the
    fingerprint, which Django refuses to read; a problem, not its HTML 400."""
    raw = json.dumps({"type": "ADD", "text": "a" * 5_000_000})
    response, row = _post(client, alias, raw)
    body = assert_refused_cleanly(response, row, alias, caplog)
    assert response.status_code == 413 and body["max_bytes"] == 2_621_440
    assert body["type"] == "http://testserver/_xsm/problems/payload-too-large"
