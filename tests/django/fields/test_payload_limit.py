"""``XSM["MAX_PAYLOAD_BYTES"]`` on the paths that open their own block: the
manager's ``send()``, the model field's ``send()`` / ``asend()`` and the
admin's payload form refuse a larger payload before any Redis I/O (the
blocks of views and of ``objects.open()`` refuse it at ``send()``, before
the send's own I/O: tests/django/test_http_table.py). On SQLite and
PostgreSQL, fakeredis and live."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django import forms

from django_xsm.admin.actions import parse_payload
from django_xsm.exceptions import PayloadTooLargeError
from django_xsm.registry import machines
from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp.models import Order
from tests.support import RoundTrips

pytestmark = pytest.mark.django_db(databases=DB_ALIASES)

#: {"note":"..."} is 11 bytes around the text: this note makes 65537 bytes
OVER = "n" * (65536 - 10)
AT_LIMIT = "n" * (65536 - 11)


def _log_of(key: str, machine: str) -> list[Any]:
    objects = machines[machine].objects
    return list(objects.history(key)) if objects.exists(key) else []


def test_the_manager_refuses_a_large_payload_before_any_io(
    backend: Any, round_trips: RoundTrips
) -> None:
    objects = machines["ticket"].objects
    with round_trips as rt, pytest.raises(PayloadTooLargeError) as err:
        objects.send("ticket:m1", "BUMP", create=True, idempotency_key="k1", note=OVER)
    assert rt.count == 0
    assert (err.value.size, err.value.limit) == (65537, 65536)
    assert not objects.exists("ticket:m1")
    objects.send("ticket:m1", "BUMP", create=True, idempotency_key="k1", note=AT_LIMIT)
    [record] = objects.history("ticket:m1")
    assert record.payload == {"note": AT_LIMIT}


def test_a_block_of_the_manager_refuses_it_at_send(backend: Any, xsm: Any) -> None:
    xsm(MAX_PAYLOAD_BYTES=20)
    objects = machines["ticket"].objects
    with pytest.raises(PayloadTooLargeError):
        with objects.open("ticket:m2") as block:
            block.send("BUMP", note="x" * 20)
    assert not objects.exists("ticket:m2")


def test_the_field_refuses_a_large_payload_before_any_io(
    alias: str, backend: Any, round_trips: RoundTrips
) -> None:
    order = Order.objects.using(alias).create(total=1)
    key = order.status.key
    before = _log_of(key, "shop")
    with round_trips as rt, pytest.raises(PayloadTooLargeError):
        order.status.send("ADD", note=OVER, reason="bulk", idempotency_key="k2")
    with pytest.raises(PayloadTooLargeError):
        async_to_sync(order.status.asend)("ADD", note=OVER)
    assert rt.count == 0
    assert _log_of(key, "shop") == before and row_in_db(Order, order.pk, alias) == ("cart", 0)
    order.status.send("ADD", note=AT_LIMIT, reason="bulk")
    assert _log_of(key, "shop")[-1].payload == {"note": AT_LIMIT}


def test_the_admin_payload_form_refuses_a_large_payload(backend: Any, xsm: Any) -> None:
    xsm(MAX_PAYLOAD_BYTES=20)
    assert parse_payload('{"note": "xxxxxxxxx"}') == {"note": "xxxxxxxxx"}  # 20 bytes
    with pytest.raises(forms.ValidationError) as err:
        parse_payload('{"note": "xxxxxxxxxx"}')
    assert "21 bytes of JSON, over the limit of 20 bytes" in str(err.value)
    with pytest.raises(forms.ValidationError, match="cannot be stored"):
        parse_payload('{"note": "\\ud800"}')  # json.loads accepts a lone surrogate
