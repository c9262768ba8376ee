"""The Outbox page of the XSM admin: counts, dead letters (cursor-paged),
retries waiting, pending entries, and the two redrives behind their own
permission (confirmation, POST + CSRF, admin history).

Entries are emitted by a real commit (the ``beacon`` machine below emits
one event per ``PING``) and moved with the outbox's own API
(``take``/``fail``), as a worker would.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.test import Client

from django_xsm.admin.outbox import cursor_before, find_dead_letter
from django_xsm.backend.build import get_backend, get_outbox
from django_xsm.engine import create_machine
from django_xsm.redis import RedisOutbox
from django_xsm.registry import machines
from tests.django.admin.conftest import ADMIN, post_with_csrf
from tests.redis.helpers import layout_of

OUTBOX = f"{ADMIN}outbox/"
REDRIVE_ALL = f"{OUTBOX}redrive-all/"
HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'

beacon = create_machine(
    {
        "id": "beacon",
        "initial": "on",
        "states": {
            "on": {
                "on": {
                    "PING": {"actions": {"type": "xstate.emit", "event": {"type": "beacon.ping"}}}
                }
            }
        },
    }
)


@pytest.fixture
def outbox(backend: Any, xsm: Any, settings: Any) -> RedisOutbox:
    """The test namespace with the ``beacon`` machine registered (four
    buckets, so listings and lookups cross buckets)."""
    xsm(
        MACHINES={**settings.XSM["MACHINES"], "beacon": f"{__name__}.beacon"},
        BUCKETS=4,
    )
    return get_outbox()


def emit(key: str, times: int = 1) -> None:
    with machines["beacon"].objects.open(key, actor="seed") as block:
        for _ in range(times):
            block.send("PING")


def kill(outbox: RedisOutbox, error: str = "boom", count: int = 100) -> list[str]:
    """Dead-letter what is in the streams (at most ``count``); their ids."""
    leases = outbox.take("test-worker", count=count)
    for lease in leases:
        assert outbox.fail(lease, error, retry_at_ms=None) == "dead"
    return [lease.entry.delivery_id for lease in leases]


def letters(outbox: RedisOutbox) -> list[str]:
    """The dead letters' delivery ids, in the outbox's order (by dead-letter
    stream id, then bucket: not necessarily the order they died in)."""
    return [d.entry.delivery_id for d in outbox.dead_letters(limit=200)]


def redrive_url(outbox: RedisOutbox, delivery_id: str) -> str:
    [found] = [d for d in outbox.dead_letters(limit=200) if d.entry.delivery_id == delivery_id]
    return f"{OUTBOX}redrive/?at={found.cursor}"


@pytest.fixture
def operator(client_for: Any) -> Client:
    return client_for("otto", "view_instance", "redrive_outbox")


@pytest.fixture
def reader(client_for: Any) -> Client:
    return client_for("rita", "view_instance")


# --- permissions --------------------------------------------------------------------


def test_anonymous_users_get_the_login_page(outbox: RedisOutbox) -> None:
    for url in (OUTBOX, REDRIVE_ALL, f"{OUTBOX}redrive/?at=1-0/0"):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/?next=")


def test_the_page_needs_view_instance(outbox: RedisOutbox, client_for: Any) -> None:
    assert client_for("nobody").get(OUTBOX).status_code == 403
    # the redrive permission alone opens nothing either
    assert client_for("only-redrive", "redrive_outbox").get(OUTBOX).status_code == 403


def test_redrives_need_their_own_permission(
    outbox: RedisOutbox, reader: Client, client_for: Any
) -> None:
    emit("beacon:1")
    [dead] = kill(outbox)
    url = redrive_url(outbox, dead)
    html = reader.get(OUTBOX).content.decode()
    assert dead in html
    assert "Redrive…" not in html and "Redrive all…" not in html  # no buttons
    assert reader.get(url).status_code == 403
    assert post_with_csrf(reader, url, {"delivery_id": dead}).status_code == 403
    assert post_with_csrf(reader, REDRIVE_ALL).status_code == 403
    # every other write permission of the admin grants no redrive
    others = client_for("olga", "view_instance", "send_event", "fire_timers", "forget_instance")
    assert post_with_csrf(others, url, {"delivery_id": dead}).status_code == 403
    assert post_with_csrf(others, REDRIVE_ALL).status_code == 403
    without_view = client_for("rob", "redrive_outbox")
    assert post_with_csrf(without_view, url, {"delivery_id": dead}).status_code == 403
    assert letters(outbox) == [dead]
    assert not LogEntry.objects.exists()


def test_redrives_are_post_with_csrf(outbox: RedisOutbox, operator: Client) -> None:
    emit("beacon:1")
    [dead] = kill(outbox)
    url = redrive_url(outbox, dead)
    assert operator.post(url, {"delivery_id": dead}).status_code == 403  # no CSRF token
    assert operator.post(REDRIVE_ALL).status_code == 403
    assert letters(outbox) == [dead]
    assert not LogEntry.objects.exists()


# --- the page ---------------------------------------------------------------------------


def test_an_empty_outbox(outbox: RedisOutbox, operator: Client) -> None:
    response = operator.get(OUTBOX)
    assert response.status_code == 200
    html = response.content.decode()
    for counter in ("pending", "retrying", "dead"):
        assert f'<td id="xsm-outbox-{counter}">0</td>' in html
    assert '<td id="xsm-outbox-lag">0.0 s</td>' in html
    assert "No dead letters." in html
    assert "Nothing is waiting for a retry." in html
    assert "The outbox is empty" in html
    assert "Redrive all…" not in html  # nothing to redrive
    assert 'id="xsm-next"' not in html


def test_counts_and_the_three_lists(outbox: RedisOutbox, operator: Client) -> None:
    emit("beacon:dead")
    [dead] = kill(outbox, "warehouse said 503")
    emit("beacon:wait")
    [lease] = outbox.take("test-worker")
    due_ms = (time.time_ns() // 1_000_000) + 3_600_000
    assert outbox.fail(lease, "timeout", retry_at_ms=due_ms) == "retry"
    emit("beacon:new", times=2)
    html = operator.get(OUTBOX).content.decode()
    assert '<td id="xsm-outbox-pending">2</td>' in html
    assert '<td id="xsm-outbox-retrying">1</td>' in html
    assert '<td id="xsm-outbox-dead">1 <span class="xsm-badge xsm-bad">' in html

    dead_box = html[
        html.index('id="xsm-outbox-dead-letters"') : html.index('id="xsm-outbox-waiting"')
    ]
    # the key links to the instance page of the registered machine
    assert f'href="{ADMIN}m/beacon/instance/?key=beacon%3Adead"' in dead_box
    assert "beacon.ping" in dead_box and "warehouse said 503" in dead_box
    assert dead in dead_box and "Redrive…" in dead_box and "Redrive all…" in dead_box
    assert '<td class="xsm-attempts">1</td>' in dead_box

    waiting = html[html.index('id="xsm-outbox-waiting"') : html.index('id="xsm-outbox-pending-')]
    assert lease.entry.delivery_id in waiting and "timeout" in waiting
    due = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(due_ms / 1000))
    assert f"{due} UTC" in waiting

    pending = html[html.index('id="xsm-outbox-pending-') :]
    assert pending.count('class="xsm-pending"') == 2
    assert "beacon:new" in pending and "not delivered yet" in pending


def test_the_error_and_the_key_are_escaped(outbox: RedisOutbox, operator: Client) -> None:
    key = "beacon:<b>bold</b>"
    emit(key)
    [dead] = kill(outbox, HOSTILE)
    for url in (OUTBOX, redrive_url(outbox, dead)):
        html = operator.get(url).content.decode()
        assert HOSTILE not in html and "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img" in html
        assert "<b>bold</b>" not in html and "beacon:&lt;b&gt;bold&lt;/b&gt;" in html
        assert "key=beacon%3A%3Cb%3Ebold%3C%2Fb%3E" in html  # only URL-encoded in links


def test_dead_letters_are_cursor_paged(outbox: RedisOutbox, operator: Client) -> None:
    for i in range(5):
        emit(f"beacon:{i}")
    kill(outbox)
    expected = letters(outbox)
    assert len(expected) == 5
    seen: list[str] = []
    url, pages = f"{OUTBOX}?limit=2", 0
    while url:
        html = operator.get(url).content.decode()
        box = html[
            html.index('id="xsm-outbox-dead-letters"') : html.index('id="xsm-outbox-waiting"')
        ]
        seen += [d for d in expected if d in box]
        assert box.count('class="xsm-dead-letter"') == (2 if pages < 2 else 1)
        assert ('id="xsm-first"' in box) == (pages > 0)
        pages += 1
        found = re.search(r'<a href="([^"]+)" id="xsm-next">', box)
        url = found[1].replace("&amp;", "&") if found else ""
    assert pages == 3 and seen == expected  # oldest first, each once
    # a cursor that is not one starts over instead of failing
    assert operator.get(f"{OUTBOX}?after=garbage").status_code == 200


def test_the_page_costs_the_same_round_trips_whatever_the_outbox_holds(
    outbox: RedisOutbox, operator: Client, round_trips: Any
) -> None:
    def trips() -> int:
        operator.get(OUTBOX)  # warm: session, schema marker
        with round_trips as rt:
            assert operator.get(OUTBOX).status_code == 200
        return int(rt.count)

    emit("beacon:a")
    kill(outbox)
    few = trips()
    for i in range(30):
        emit(f"beacon:{i}", times=2)
    kill(outbox)
    assert len(letters(outbox)) == 61
    assert trips() == few


def test_a_machine_that_is_not_registered_links_through_find(
    outbox: RedisOutbox, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    emit("beacon:gone")
    kill(outbox)
    monkeypatch.setattr(machines, "name_for_machine_id", lambda machine_id, default=None: default)
    html = operator.get(OUTBOX).content.decode()
    assert f'href="{ADMIN}find/?key=beacon%3Agone"' in html


def test_the_machines_and_instance_pages_link_to_the_outbox(
    outbox: RedisOutbox, operator: Client
) -> None:
    emit("beacon:1")
    assert f'href="{OUTBOX}"' in operator.get(ADMIN).content.decode()
    detail = operator.get(f"{ADMIN}m/beacon/instance/?key=beacon:1").content.decode()
    assert f'href="{OUTBOX}"' in detail and 'id="xsm-instance-outbox"' in detail


# --- redrive one ---------------------------------------------------------------------


def test_redrive_confirms_then_moves_the_entry_back_with_its_delivery_id(
    outbox: RedisOutbox, operator: Client
) -> None:
    emit("beacon:1")
    emit("beacon:2")
    first, second = kill(outbox, "refused")
    key = {d.entry.delivery_id: d.entry.key for d in outbox.dead_letters()}[first]
    url = redrive_url(outbox, first)
    confirm = operator.get(url)
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert f'<span class="xsm-mono" id="xsm-redrive-id">{first}</span>' in html
    assert "refused" in html and 'id="xsm-redrive-confirm"' in html
    assert f'name="delivery_id" value="{first}"' in html
    assert f'<a href="{OUTBOX}">Outbox</a>' in html  # in the breadcrumbs
    assert sorted(letters(outbox)) == sorted([first, second])  # a confirmation changes nothing

    done = post_with_csrf(operator, url, {"delivery_id": first})
    assert done.status_code == 302 and done["Location"] == OUTBOX
    assert letters(outbox) == [second]
    [(entry, consumer, _idle)] = outbox.pending()
    assert (entry.delivery_id, entry.key, entry.attempts, consumer) == (first, key, 0, "")
    assert entry.event == {"type": "beacon.ping"}
    [log] = LogEntry.objects.all()
    assert (log.object_id, log.action_flag, log.user.username) == (f"beacon:{key}", CHANGE, "otto")
    assert log.change_message == (
        f"Redrove outbox delivery {first} (beacon.ping, 1 attempt, last error: refused)"
    )
    page = operator.get(OUTBOX).content.decode()
    assert "back in the outbox for delivery" in page
    assert first in page[page.index('id="xsm-outbox-pending-') :]

    # the next worker takes it again, as a new delivery of the same id
    [lease] = outbox.take("next-worker")
    assert lease.entry.delivery_id == first and lease.entry.delivery().attempt == 1


def test_a_redrive_of_a_letter_that_is_gone_changes_nothing(
    outbox: RedisOutbox, operator: Client
) -> None:
    emit("beacon:1")
    [dead] = kill(outbox)
    url = redrive_url(outbox, dead)
    assert post_with_csrf(operator, url, {"delivery_id": dead}).status_code == 302
    again = post_with_csrf(operator, url, {"delivery_id": dead})
    assert again.status_code == 302 and again["Location"] == OUTBOX
    assert "no longer there" in operator.get(OUTBOX).content.decode()
    assert operator.get(url).status_code == 302  # the confirmation too
    assert LogEntry.objects.count() == 1
    for bad in ("", "nonsense", "1-0", "1-0/x", "99999999999999-0/0"):
        assert post_with_csrf(operator, f"{OUTBOX}redrive/?at={bad}").status_code == 302
    assert LogEntry.objects.count() == 1
    assert len(outbox.pending()) == 1


def test_a_redrive_for_another_delivery_id_changes_nothing(
    outbox: RedisOutbox, operator: Client
) -> None:
    emit("beacon:1", times=2)
    first, second = kill(outbox)
    response = post_with_csrf(operator, redrive_url(outbox, first), {"delivery_id": second})
    assert response.status_code == 302
    assert sorted(letters(outbox)) == sorted([first, second])
    assert not LogEntry.objects.exists()


def test_every_letter_is_found_by_its_cursor_in_one_read(outbox: RedisOutbox) -> None:
    for i in range(12):
        emit(f"beacon:{i}", times=2)  # two letters with consecutive stream ids
    kill(outbox)
    found = outbox.dead_letters(limit=100)
    assert len(found) == 24 and len({d.bucket for d in found}) > 1
    for letter in found:
        again = find_dead_letter(outbox, letter.cursor)
        assert again is not None and again.entry.delivery_id == letter.entry.delivery_id
    assert find_dead_letter(outbox, "1-0/0") is None
    assert cursor_before("5-0", 0) == f"4-{2**64 - 1}"
    assert cursor_before("5-3", 0) == "5-2"
    assert cursor_before("5-3", 2) == "5-3/1"
    assert cursor_before("0-0", 0) == ""


def test_a_damaged_letter_is_shown_but_cannot_be_redriven(
    outbox: RedisOutbox, operator: Client
) -> None:
    emit("beacon:1")
    store = get_backend().store
    layout = layout_of(store)
    # an entry without a delivery id, as a broken writer might leave one
    fields = {"k": "beacon:1", "m": "beacon", "v": "1", "e": '{"type": "x"}'}
    store.client.xadd(layout.outbox(layout.bucket("beacon:1")), fields)
    assert [lease.entry.key for lease in outbox.take("test-worker")] == ["beacon:1"]
    [damaged] = outbox.dead_letters()
    assert damaged.entry.delivery_id == ""
    html = operator.get(OUTBOX).content.decode()
    assert "no delivery id (id)" in html and ">damaged</span>" in html
    assert "Redrive…" not in html
    url = f"{OUTBOX}redrive/?at={damaged.cursor}"
    for response in (operator.get(url), post_with_csrf(operator, url, {"delivery_id": ""})):
        assert response.status_code == 302
    assert "cannot be redriven" in operator.get(OUTBOX).content.decode()
    assert len(outbox.dead_letters()) == 1 and not LogEntry.objects.exists()


def test_cursors_past_a_stream_id_are_refused_quietly(
    outbox: RedisOutbox, operator: Client
) -> None:
    huge = f"{2**64}-0"
    assert operator.get(f"{OUTBOX}?after={huge}/0").status_code == 200  # starts over
    assert operator.get(f"{OUTBOX}redrive/?at={huge}/0").status_code == 302
    assert find_dead_letter(outbox, f"0-{2**64}/1") is None


# --- redrive all ---------------------------------------------------------------------


def test_redrive_all_confirms_then_moves_every_letter(
    outbox: RedisOutbox, operator: Client
) -> None:
    for i in range(3):
        emit(f"beacon:{i}")
    dead = kill(outbox)
    confirm = operator.get(REDRIVE_ALL).content.decode()
    assert '<span id="xsm-redrive-all-count">3</span>' in confirm
    assert len(letters(outbox)) == 3
    done = post_with_csrf(operator, REDRIVE_ALL)
    assert done.status_code == 302 and done["Location"] == OUTBOX
    assert letters(outbox) == []
    assert sorted(e.delivery_id for e, _, _ in outbox.pending()) == sorted(dead)
    [log] = LogEntry.objects.all()
    assert (log.object_id, log.object_repr) == ("outbox", "XSM outbox")
    assert log.change_message == "Redrove all outbox dead letters: 3 back in the outbox"
    # the history entry links back to the Outbox page
    assert log.get_admin_url() == f"{ADMIN}outbox/change/"
    assert operator.get(log.get_admin_url())["Location"] == OUTBOX


def test_redrive_all_with_nothing_dead_records_nothing(
    outbox: RedisOutbox, operator: Client
) -> None:
    assert '<span id="xsm-redrive-all-count">0</span>' in operator.get(REDRIVE_ALL).content.decode()
    assert post_with_csrf(operator, REDRIVE_ALL).status_code == 302
    assert "no dead letters to redrive" in operator.get(OUTBOX).content.decode()
    assert not LogEntry.objects.exists()


def test_superusers_may_redrive(outbox: RedisOutbox, client_for: Any) -> None:
    root = client_for("root", superuser=True)
    emit("beacon:1")
    [dead] = kill(outbox)
    assert "Redrive…" in root.get(OUTBOX).content.decode()
    assert post_with_csrf(root, redrive_url(outbox, dead), {"delivery_id": dead}).status_code == 302
    assert letters(outbox) == []


# --- the store is down ---------------------------------------------------------------


def test_the_pages_say_the_store_is_unavailable(xsm: Any, client_for: Any) -> None:
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    root = client_for("root", superuser=True)
    for response in (
        root.get(OUTBOX),
        root.get(REDRIVE_ALL),
        post_with_csrf(root, REDRIVE_ALL),
        post_with_csrf(root, f"{OUTBOX}redrive/?at=1-0/0", {"delivery_id": "x"}),
    ):
        assert response.status_code == 503
        assert "The XSM state store is unavailable right now" in response.content.decode()
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("limit", ["²", "9" * 5000, "-5", "0", "x", "100000"])
def test_a_strange_limit_still_shows_the_page(
    outbox: RedisOutbox, operator: Client, limit: str
) -> None:
    emit("beacon:odd")
    kill(outbox)
    response = operator.get(OUTBOX, {"limit": limit})
    assert response.status_code == 200
    assert "beacon:odd" in response.content.decode()
