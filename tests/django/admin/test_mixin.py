"""``StatechartAdminMixin`` on the ModelAdmins of the model-field test app
(``tests/django/admin/sites.py``, mounted at ``/shop-admin/``): the state
column and filter, the change page's panel, the send page (preview, then a
CSRF-checked POST), permissions, the admin history and bad input."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_xsm.admin.actions import MAX_PAYLOAD_CHARS
from tests.django.admin.conftest import post_with_csrf
from tests.fieldapp.models import Order, Parcel, Shipment

SITE = "/shop-admin/fieldapp/"


@pytest.fixture
def staff(db: Any) -> Any:
    """``staff("name", "change_order", ...)``: a logged-in client
    (``enforce_csrf_checks=True``) for a staff user with fieldapp
    permissions."""

    def build(name: str, *codenames: str, superuser: bool = False) -> Client:
        user = User.objects.create_user(name, password="pw", is_staff=True)
        user.is_superuser = superuser
        user.save()
        for codename in codenames:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label="fieldapp", codename=codename)
            )
        client = Client(enforce_csrf_checks=True)
        client.force_login(user)
        return client

    return build


@pytest.fixture
def root(staff: Any) -> Client:
    client: Client = staff("root", superuser=True)
    return client


def order_in(state: str, *, total: int = 10) -> Order:
    """An order moved to ``state`` by events (cart needs none)."""
    order = Order.objects.create(total=total)
    if state != "cart":
        order.status.send("PAY_ANYWAY", actor="seed")
    if state in ("shipped", "refunded"):
        order.status.send("SHIP" if state == "shipped" else "REFUND", actor="seed")
    return Order.objects.get(pk=order.pk)


def send_url(obj: Any, event: str, field: str = "status") -> str:
    model = type(obj).__name__.lower()
    return f"{SITE}{model}/{obj.pk}/statechart/{field}/send/?event={event}"


def change_url(obj: Any) -> str:
    return f"{SITE}{type(obj).__name__.lower()}/{obj.pk}/change/"


def hidden(html: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    assert found is not None, name
    return found.group(1).replace("&quot;", '"').replace("&amp;", "&")


def buttons(html: str, field: str = "status") -> list[str]:
    panel = html.split(f'id="xsm-{field}"', 1)[1].split("</fieldset>", 1)[0]
    return re.findall(r'class="button xsm-event[^"]*" href="[^"]*" data-event="([^"]+)"', panel)


def apply(client: Client, obj: Any, event: str, payload: Any = None, **kw: Any) -> Any:
    """Preview (GET, or POST with ``payload``), then POST the confirmation."""
    url = send_url(obj, event, kw.pop("field", "status"))
    if payload is None:
        preview = client.get(url)
    else:
        preview = post_with_csrf(client, url, {"step": "preview", "payload": json.dumps(payload)})
    assert preview.status_code == 200, preview.content
    html = preview.content.decode()
    data = {"step": "apply", "version": hidden(html, "version"), "payload": hidden(html, "payload")}
    return post_with_csrf(client, url, data)


# --- the changelist ------------------------------------------------------------------


def test_the_state_column_is_listed(backend: Any, root: Client) -> None:
    order_in("cart")
    order_in("paid")
    html = root.get(f"{SITE}order/").content.decode()
    assert 'column-status">' in html
    assert '<td class="field-status">cart</td>' in html
    assert '<td class="field-status">paid</td>' in html
    # A ModelAdmin that lists nothing gets the column after __str__.
    Parcel.objects.create()
    html = root.get(f"{SITE}parcel/").content.decode()
    assert '<td class="field-state">packing</td>' in html


def result_count(client: Client, url: str) -> int:
    response = client.get(url)
    assert response.status_code == 200, url
    count: int = response.context["cl"].result_count
    return count


def test_the_state_filter_offers_leaves_and_parents_and_counts(backend: Any, root: Client) -> None:
    for state in ("cart", "paid", "paid", "shipped"):
        order_in(state)
    base = f"{SITE}order/"
    assert result_count(root, f"{base}?status__exact=paid") == 2
    assert result_count(root, f"{base}?status__exact=shipped") == 1
    assert result_count(root, f"{base}?status__exact=refunded") == 0
    html = root.get(f"{base}?_facets=True").content.decode()
    for label in ("cart (1)", "paid (2)", "shipped (1)", "refunded (0)"):
        assert label in html

    # Compound states by prefix, parallel regions by their parallel state.
    _packing, shipping, tracking = (Parcel.objects.create() for _ in range(3))
    shipping.state.send("PACKED")
    tracking.state.send("PACKED")
    tracking.state.send("SPLIT")
    base = f"{SITE}parcel/"
    html = root.get(base).content.decode()
    choices = re.findall(r'<a href="\?state__(?:exact|startswith)=[^"]*">([^<]+)</a>', html)
    assert choices == ["packing", "shipping.*", "shipping.picked", "shipping.loaded", "tracking.*"]
    assert result_count(root, f"{base}?state__startswith=shipping.") == 1
    assert result_count(root, f"{base}?state__exact=shipping.picked") == 1
    assert result_count(root, f"{base}?state__startswith=tracking.") == 1
    assert result_count(root, f"{base}?state__exact=packing") == 1


def test_a_plain_list_filter_name_becomes_the_state_filter(backend: Any, root: Client) -> None:
    Shipment.objects.create()
    html = root.get(f"{SITE}shipment/").content.decode()
    assert "?delivery__startswith=shipping." in html  # listed by the user
    assert "?payment__exact=cart" in html  # added by the mixin


# --- the change page ---------------------------------------------------------------


def test_the_change_page_shows_state_chart_context_events_and_log(
    backend: Any, root: Client, xsm: Any
) -> None:
    order = Order.objects.create(total=5)
    with order.status.open(actor="seed", context={"items": 0, "password": "hunter2"}) as chart:
        chart.send("ADD", n=2, card_number="4111111111111111")
    html = root.get(change_url(order)).content.decode()
    panel = html.split('id="xsm-status"', 1)[1]
    assert '<td class="xsm-mono xsm-state-value">cart</td>' in panel
    assert "<svg" in panel and 'class="xsm-diagram"' in panel
    assert 'data-state-id="shop.cart" data-active="true"' in panel
    assert "&quot;items&quot;: 2" in panel
    assert "hunter2" not in html and "4111111111111111" not in html
    assert "[redacted]" in panel
    assert buttons(html) == ["ADD", "PAY", "PAY_ANYWAY"]
    assert re.search(r'xsm-conditional" href="[^"]*" data-event="PAY"', panel)
    rows = re.findall(r'<tr class="xsm-log-row" data-seq="(\d+)"', panel)
    assert rows == ["1"]
    assert '<td class="xsm-actor">seed</td>' in panel


def test_a_row_without_events_yet_shows_its_initial_state(backend: Any, root: Client) -> None:
    order = Order.objects.create()
    html = root.get(change_url(order)).content.decode()
    assert '<td class="xsm-mono xsm-state-value">cart</td>' in html
    assert "No records yet." in html
    assert buttons(html) == ["ADD", "PAY", "PAY_ANYWAY"]


def test_the_log_is_paged_newest_last(backend: Any, root: Client) -> None:
    order = Order.objects.create()
    with order.status.open(actor="seed") as chart:
        for _ in range(25):
            chart.send("ADD")
    html = root.get(change_url(order)).content.decode()
    seqs = [int(s) for s in re.findall(r'class="xsm-log-row" data-seq="(\d+)"', html)]
    assert seqs == list(range(6, 26))
    older = re.search(r'<a href="(\?status_after_seq=\d+#xsm-status)">« Older</a>', html)
    assert older is not None
    html = root.get(change_url(order) + older.group(1).split("#")[0]).content.decode()
    seqs = [int(s) for s in re.findall(r'class="xsm-log-row" data-seq="(\d+)"', html)]
    assert seqs == list(range(1, 21)) and "Latest</a>" in html


def test_a_model_with_two_statecharts_has_two_panels(backend: Any, root: Client) -> None:
    shipment = Shipment.objects.create()
    html = root.get(change_url(shipment)).content.decode()
    assert buttons(html, "payment") == ["ADD", "PAY", "PAY_ANYWAY"]
    assert buttons(html, "delivery") == ["PACKED"]
    response = apply(root, shipment, "PACKED", field="delivery")
    assert response.status_code == 302
    shipment.refresh_from_db()
    assert (str(shipment.delivery), str(shipment.payment)) == ("shipping.picked", "cart")
    assert shipment.payment.version == 0  # the other statechart was not touched


# --- sending -----------------------------------------------------------------------


def test_the_send_page_previews_and_changes_nothing(backend: Any, root: Client) -> None:
    order = order_in("cart")
    response = root.get(send_url(order, "PAY_ANYWAY"))
    html = response.content.decode()
    assert response.status_code == 200
    assert '<span id="xsm-before">cart</span> → <span id="xsm-after">paid</span>' in html
    assert 'id="xsm-apply"' in html
    order.refresh_from_db()
    assert str(order.status) == "cart" and order.status.version == 0


def test_a_post_sends_moves_the_row_and_is_recorded(backend: Any, staff: Any) -> None:
    clerk = staff("clerk", "change_order", "view_order")
    order = order_in("cart")
    response = apply(clerk, order, "PAY_ANYWAY")
    assert response.status_code == 302
    assert response["Location"] == f"{change_url(order)}#xsm-status"
    row = Order.objects.get(pk=order.pk)
    assert (row.status.column, row.status_version) == ("paid", 1)
    record = backend.store.load(f"shop:{order.pk}")
    assert record is not None and record.snapshot["value"] == "paid"
    last = row.status.history()[-1]
    assert (last.actor, last.event_type, last.reason) == ("clerk", "PAY_ANYWAY", "admin")
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_id, entry.user.username) == (
        CHANGE,
        str(order.pk),
        "clerk",
    )
    assert entry.get_change_message() == "Sent PAY_ANYWAY to status: cart → paid"
    page = clerk.get(response["Location"]).content.decode()
    assert "Sent PAY_ANYWAY to status: cart → paid." in page


def test_a_conditional_event_takes_a_payload(backend: Any, root: Client) -> None:
    order = order_in("cart")
    html = root.get(send_url(order, "PAY")).content.decode()
    # the page opens on the payload form: no refusal, no error before a preview
    assert 'id="xsm-payload-form"' in html and 'id="xsm-apply"' not in html
    assert 'id="xsm-refused"' not in html and "errornote" not in html
    url = send_url(order, "PAY")
    empty = post_with_csrf(root, url, {"step": "preview", "payload": "{}"})
    assert empty.status_code == 400
    assert "PAY cannot be evaluated with this payload" in empty.content.decode()
    low = post_with_csrf(root, url, {"step": "preview", "payload": '{"amount": 5}'})
    refused = low.content.decode()
    assert 'id="xsm-refused"' in refused and 'id="xsm-apply"' not in refused
    # the guard is named, in the API's words
    assert "was not accepted in state &#x27;cart&#x27;: guard &#x27;paysEnough&#x27; said no" in (
        refused
    )
    assert apply(root, order, "PAY", {"amount": 20}).status_code == 302
    assert Order.objects.get(pk=order.pk).status == "paid"
    assert Order.objects.get(pk=order.pk).status.history()[-1].payload == {"amount": 20}


def test_payload_keys_never_become_send_options(backend: Any, root: Client) -> None:
    order = order_in("cart")
    apply(root, order, "ADD", {"n": 3, "actor": "mallory", "lock": "pessimistic"})
    last = Order.objects.get(pk=order.pk).status.history()[-1]
    assert last.actor == "root" and last.payload["actor"] == "mallory"
    assert Order.objects.get(pk=order.pk).status.context["items"] == 3


def test_a_refused_event_is_an_admin_message(backend: Any, root: Client) -> None:
    order = order_in("cart")
    url = send_url(order, "SHIP")
    html = root.get(url).content.decode()
    assert 'id="xsm-refused"' not in html and 'id="xsm-apply"' not in html
    preview = post_with_csrf(root, url, {"step": "preview", "payload": "{}"}).content.decode()
    assert 'id="xsm-refused"' in preview and 'id="xsm-apply"' not in preview
    assert "the current state has no transition for it" in preview
    response = post_with_csrf(root, url, {"step": "apply", "version": "0", "payload": "{}"})
    assert response.status_code == 302
    page = root.get(response["Location"]).content.decode()
    assert "Refused: Event &#x27;SHIP&#x27; was not accepted" in page
    assert Order.objects.get(pk=order.pk).status.version == 0
    assert not LogEntry.objects.exists()


def test_a_stale_preview_is_shown_again_and_sends_nothing(backend: Any, root: Client) -> None:
    order = order_in("cart")
    html = root.get(send_url(order, "PAY_ANYWAY")).content.decode()
    version = hidden(html, "version")
    order.status.send("ADD", actor="someone")  # between the preview and the click
    response = post_with_csrf(
        root, send_url(order, "PAY_ANYWAY"), {"step": "apply", "version": version, "payload": "{}"}
    )
    assert response.status_code == 409
    assert "changed since the preview; nothing was sent" in response.content.decode()
    assert hidden(response.content.decode(), "version") == "1"
    assert Order.objects.get(pk=order.pk).status == "cart"


def test_a_store_outage_is_shown_not_raised(backend: Any, root: Client, xsm: Any) -> None:
    order = order_in("cart")
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    response = root.get(change_url(order))
    assert response.status_code == 200
    assert "The XSM state store is unavailable right now" in response.content.decode()
    response = post_with_csrf(
        root, send_url(order, "ADD"), {"step": "apply", "version": "0", "payload": "{}"}
    )
    assert response.status_code == 302
    assert "unavailable" in root.get(response["Location"]).content.decode()


def test_a_damaged_record_is_a_panel_problem_and_a_warning(
    backend: Any, root: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """The same answer as the XSM browser's instance page: 200, the record
    cannot be read, one WARNING without traceback."""
    from django_xsm.backend import get_store

    order = order_in("paid")
    store = get_store()
    store.client.hset(store.layout.snapshot(order.status.key), "d", b"{not json")
    with caplog.at_level(logging.INFO):
        response = root.get(change_url(order))
    assert response.status_code == 200
    assert "The statechart cannot be read: " in response.content.decode()
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert (warning.name, warning.levelno, warning.exc_info) == (
        "django_xsm.admin",
        logging.WARNING,
        None,
    )
    assert f"{order.status.key!r}" in warning.getMessage()


# --- permissions, CSRF, bad input --------------------------------------------------------


def test_an_event_permission_hides_the_button_and_refuses_the_send(
    backend: Any, staff: Any, root: Client
) -> None:
    order = order_in("paid")
    clerk = staff("clerk", "change_order", "view_order")
    assert buttons(clerk.get(change_url(order)).content.decode()) == ["SHIP"]
    assert clerk.get(send_url(order, "REFUND")).status_code == 403
    post = post_with_csrf(clerk, send_url(order, "REFUND"), {"step": "apply", "version": "1"})
    assert post.status_code == 403
    assert Order.objects.get(pk=order.pk).status == "paid"

    refunder = staff("refunder", "change_order", "refund_order")
    assert buttons(refunder.get(change_url(order)).content.decode()) == ["SHIP", "REFUND"]
    assert apply(refunder, order, "REFUND").status_code == 302
    assert Order.objects.get(pk=order.pk).status == "refunded"
    assert buttons(root.get(change_url(order)).content.decode()) == []


def test_sending_needs_the_change_permission(backend: Any, staff: Any) -> None:
    order = order_in("cart")
    viewer = staff("viewer", "view_order", "refund_order")
    html = viewer.get(change_url(order)).content.decode()
    assert 'id="xsm-status"' in html and buttons(html) == []
    assert viewer.get(send_url(order, "ADD")).status_code == 403
    data = {"step": "apply", "version": "0", "payload": "{}"}
    assert post_with_csrf(viewer, send_url(order, "ADD"), data).status_code == 403
    assert Order.objects.get(pk=order.pk).status.version == 0


def test_the_send_is_csrf_protected(backend: Any, root: Client) -> None:
    order = order_in("cart")
    response = root.post(send_url(order, "ADD"), {"step": "apply", "version": "0"})
    assert response.status_code == 403
    assert Order.objects.get(pk=order.pk).status.version == 0


@pytest.mark.parametrize(
    "path",
    [
        "order/{pk}/statechart/total/send/?event=ADD",  # not a StatechartField
        "order/{pk}/statechart/nope/send/?event=ADD",
        "order/{pk}/statechart/status/send/?event=NOPE",
        "order/{pk}/statechart/status/send/?event=xstate.init",
        "order/{pk}/statechart/status/send/",
    ],
)
def test_unknown_fields_and_events_are_404(backend: Any, root: Client, path: str) -> None:
    order = order_in("cart")
    assert root.get(SITE + path.format(pk=order.pk)).status_code == 404


def test_a_missing_object_redirects_like_the_admin(backend: Any, root: Client) -> None:
    response = root.get(f"{SITE}order/999/statechart/status/send/?event=ADD")
    assert response.status_code == 302 and response["Location"] == "/shop-admin/"
    assert "does not exist" in root.get("/shop-admin/").content.decode()


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ("[1, 2]", "The payload must be a JSON object"),
        ("{not json", "Not valid JSON"),
        ('{"type": "X"}', "The payload may not hold"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        (json.dumps({"n": "x" * MAX_PAYLOAD_CHARS}), "Ensure this value has at most"),
    ],
)
def test_a_bad_payload_is_a_form_error(
    backend: Any, root: Client, payload: str, error: str
) -> None:
    order = order_in("cart")
    for step in ("preview", "apply"):
        data = {"step": step, "version": "0", "payload": payload}
        response = post_with_csrf(root, send_url(order, "ADD"), data)
        assert response.status_code == 400, step
        assert error in response.content.decode()
    assert Order.objects.get(pk=order.pk).status.version == 0
