"""With an encrypting codec, nothing of a planted secret is stored in clear:
snapshots, stored responses, outbox entries (pending, waiting, dead), their
errors and the transition log are all sealed, and every reader still sees
the plain values. Key rotation: written under key A, rotated to [B, A],
``xsm_reencrypt``, then read with B alone."""

from __future__ import annotations

import io
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path

from django_xsm import backend as stores
from django_xsm.backend import clients
from django_xsm.backend.build import get_outbox
from django_xsm.decorators import stateful_view
from django_xsm.exceptions import SnapshotCorruptError
from django_xsm.outbox import HandlerTable
from django_xsm.persistence.sealing import SEALED
from django_xsm.registry import machines
from tests.django.conftest import key_header
from tests.django.outbox.conftest import Recorder
from tests.django.outbox.conftest import worker as make_worker

SECRET = "zq-SECRET-7731"


@stateful_view("shipment", key="shipment:{sid}")
def note_view(request: HttpRequest, sid: str, *, instance: Any) -> HttpResponse:
    instance.send("NOTE", kind="plain", text=SECRET)
    return JsonResponse({"echo": SECRET}, status=201)


urlpatterns = [path("s/<slug:sid>/note", note_view)]


def leaky(event: dict[str, Any], *, delivery: Any) -> None:
    raise RuntimeError(f"could not deliver {event.get('text')}")


def every_value(client: Any, prefix: str) -> list[tuple[str, bytes]]:
    """Every stored value (and field name) of the namespace, by key."""
    out: list[tuple[str, bytes]] = []
    for raw in client.scan_iter(match="{" + prefix + "*", count=500):
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        kind = client.type(name)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            out.append((name, client.get(name)))
        elif kind == "hash":
            out += [(name, k + b"=" + v) for k, v in client.hgetall(name).items()]
        elif kind == "list":
            out += [(name, v) for v in client.lrange(name, 0, -1)]
        elif kind == "zset":
            out += [(name, m) for m, _ in client.zrange(name, 0, -1, withscores=True)]
        elif kind == "stream":
            for _, fields in client.xrange(name):
                out += [(name, k + b"=" + v) for k, v in fields.items()]
        else:
            raise AssertionError(f"{name} holds a {kind}")
    return out


def write_everything(client: Any, sid: str) -> str:
    """Every path that stores user data, the secret in each; returns the
    dead letter's delivery id."""
    objects = machines["shipment"].objects
    # a commit with a payload (snapshot, log record, outbox entry)
    objects.send(f"shipment:{sid}", "NOTE", create=True, kind="plain", text=SECRET)
    # an idempotent request: its response is stored for the replay
    first = client.post(f"/s/{sid}/note", **key_header("k-1"))
    again = client.post(f"/s/{sid}/note", **key_header("k-1"))
    assert first.status_code == again.status_code == 201
    assert again.json() == {"echo": SECRET}
    assert again["Idempotent-Replayed"] == "true"
    # a handler that fails until the entry is a dead letter
    w, _ = make_worker(Recorder(0.0), attempts=2)
    w.handlers = HandlerTable({"note.*": leaky})
    w.run_batch()
    outbox = get_outbox()
    ((waiting, _),) = [(e, d) for e, d in outbox.waiting() if SECRET in e.event.get("text", "")][:1]
    assert SECRET in waiting.last_error  # read back in clear
    for _ in range(3):
        w.run_batch()
    dead = outbox.dead_letters()
    assert dead and all(d.entry.event["text"] == SECRET for d in dead)
    assert SECRET in dead[0].entry.last_error
    return dead[0].entry.delivery_id


def use_keys(xsm: Any, keys: list[str] | None, prefix: str) -> stores.Backend:
    """XSM['CODEC_KEYS'] = ``keys``; the data stays (the embedded server
    too, which a settings change would otherwise start afresh)."""
    kept = clients._embedded_server
    xsm(CODEC_KEYS=keys, PREFIX=prefix)
    if kept is not None:
        clients._embedded_server = kept
    return stores.get_backend()


def assert_no_plaintext(found: stores.Backend) -> None:
    prefix = found.store.prefix
    values = every_value(found.client, prefix)
    assert {name.split("}:", 1)[1].split(":", 1)[0] for name, _ in values} >= {
        "s",
        "log",
        "in",
        "obd",
    }
    leaks = [(name, v) for name, v in values if SECRET.encode() in v]
    assert not leaks, leaks
    assert any(SEALED.encode() in v for _, v in values)


def assert_reads(found: stores.Backend, sid: str) -> None:
    records = found.log.read(f"shipment:{sid}")
    assert [r.payload.get("text") for r in records if r.event_type == "NOTE"] == [SECRET] * 2
    snapshot = found.store.load(f"shipment:{sid}")
    assert snapshot is not None
    assert [d.entry.event["text"] for d in get_outbox().dead_letters()] == [SECRET] * 2


@pytest.mark.urls(__name__)
def test_nothing_of_a_planted_secret_is_stored_in_clear(
    backend: Any, xsm: Any, client: Any
) -> None:
    found = use_keys(xsm, [Fernet.generate_key().decode()], backend.store.prefix)
    write_everything(client, "1")
    assert_no_plaintext(found)
    assert_reads(found, "1")


@pytest.mark.urls(__name__)
def test_rotation_then_reencrypt_then_the_old_key_is_dropped(
    backend: Any, xsm: Any, client: Any
) -> None:
    prefix = backend.store.prefix
    key_a, key_b = (Fernet.generate_key().decode() for _ in range(2))
    use_keys(xsm, [key_a], prefix)
    write_everything(client, "1")
    machines["shipment"].objects.send("shipment:2", "NOTE", create=True, text=SECRET)
    use_keys(xsm, [key_b, key_a], prefix)
    out = io.StringIO()
    call_command("xsm_reencrypt", "--dry-run", stdout=out)
    planned = int(out.getvalue().strip().splitlines()[-1].split(", ")[1].split()[0])
    assert planned > 0
    out = io.StringIO()
    call_command("xsm_reencrypt", "--batch", "3", stdout=out)
    lines = out.getvalue().strip().splitlines()
    assert len(lines) >= 2 and lines[-1].startswith("done:")
    assert f"{planned} values rewritten, 0 busy" in lines[-1], lines[-1]
    out = io.StringIO()
    call_command("xsm_reencrypt", "--dry-run", stdout=out)
    assert ", 0 values to rewrite, 0 busy" in out.getvalue()
    found = use_keys(xsm, [key_b], prefix)
    assert_reads(found, "1")
    assert found.store.load("shipment:2") is not None
    assert_no_plaintext(found)
    # the stored response replays under key B alone
    again = client.post("/s/1/note", **key_header("k-1"))
    assert again.json() == {"echo": SECRET} and again["Idempotent-Replayed"] == "true"


@pytest.mark.urls(__name__)
def test_reencrypt_counts_the_values_a_codec_turned_on_later_left_in_clear(
    backend: Any, xsm: Any, client: Any
) -> None:
    prefix = backend.store.prefix
    use_keys(xsm, None, prefix)
    write_everything(client, "1")
    use_keys(xsm, [Fernet.generate_key().decode()], prefix)
    reports = []
    for args in (["--dry-run"], []):
        out = io.StringIO()
        call_command("xsm_reencrypt", *args, stdout=out)
        reports.append(out.getvalue().strip().splitlines()[-1])
    clear = int(reports[0].split(", ")[3].split()[0])
    assert clear > 0
    assert reports[0].endswith(
        f"0 values to rewrite, 0 busy, {clear} values in clear (the command does not "
        "encrypt values in clear; see 'Turning a codec on' in docs/security.md)"
    ), reports[0]
    assert f"0 values rewritten, 0 busy, {clear} values in clear (" in reports[1], reports[1]
    # what is written under the codec is sealed, not counted
    machines["shipment"].objects.send("shipment:2", "NOTE", create=True, text=SECRET)
    out = io.StringIO()
    call_command("xsm_reencrypt", "--dry-run", stdout=out)
    assert f", {clear} values in clear (" in out.getvalue()


@pytest.mark.parametrize("later", ["no keys", "another key"])
def test_encrypted_data_without_its_key_asks_for_the_keys_never_to_erase(
    backend: Any, xsm: Any, later: str
) -> None:
    """Data written under key A, read with no CODEC_KEYS (a worker missing
    them) or with key B only: every reader says it is encrypted and names
    the setting; none suggests xsm_forget, which would delete good data."""
    prefix = backend.store.prefix
    key_a = Fernet.generate_key().decode()
    use_keys(xsm, [key_a], prefix)
    machines["shipment"].objects.send("shipment:2", "NOTE", create=True, text=SECRET)
    found = use_keys(xsm, None if later == "no keys" else [Fernet.generate_key().decode()], prefix)
    errors = []
    with pytest.raises(SnapshotCorruptError) as snap:
        found.store.load("shipment:2")
    errors.append(snap.value)
    with pytest.raises(SnapshotCorruptError) as log:
        found.log.read("shipment:2")
    errors.append(log.value)
    assert "Snapshot of 'shipment:2' (version 1) " in str(snap.value)
    assert "Transition log of 'shipment:2': entry '1-0' holds an encrypted value" in str(log.value)
    opened = "none of the configured keys opens" if later == "another key" else "no codec"
    assert opened in str(log.value)
    for error in errors:
        assert error.encrypted and error.key == "shipment:2"
        assert "XSM['CODEC_KEYS']" in error.hint and "xsm_forget" not in str(error)
    with pytest.raises(CommandError) as inspected:
        call_command("xsm_inspect", "shipment:2", stdout=io.StringIO())
    text = str(inspected.value)
    assert text.startswith("Snapshot of 'shipment:2' (version 1) ")
    assert "XSM['CODEC_KEYS']" in text and "xsm_forget" not in text
    # with the key back, everything reads again: nothing was damaged
    found = use_keys(xsm, [key_a], prefix)
    assert found.store.load("shipment:2") is not None
    assert [r.payload["text"] for r in found.log.read("shipment:2")] == [SECRET]
