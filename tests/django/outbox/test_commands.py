"""``xsm_outbox``: the listing (text and --json), redrive of one or all dead
letters, purge of old ones, --dry-run, and exit status 1 with a message
that says what to do."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.management.base import CommandError

from django_xsm.backend.build import get_outbox
from django_xsm.registry import machines
from tests.django.outbox import handlers
from tests.django.outbox.conftest import Recorder, run
from tests.django.outbox.conftest import worker as make_worker


def _three_kinds() -> dict[str, str]:
    """A dead letter (mute:1), a retry due in a minute (mute:2) and a fresh
    entry (shipment:1); their delivery ids by key."""
    handlers.FAIL["flaky"] = -1
    mute = machines["mute"].objects
    mute.send("mute:1", "PING", create=True)
    make_worker(Recorder(1.0), attempts=1)[0].run_batch()
    mute.send("mute:2", "PING", create=True)
    w, _ = make_worker(Recorder(1.0), attempts=3, backoff_s=60.0, cap_s=60.0, behind_ms=0)
    w.run_batch()
    machines["shipment"].objects.send("shipment:1", "PAY", create=True)
    ids = {d.entry.key: d.entry.delivery_id for d in get_outbox().dead_letters()}
    ids.update({e.key: e.delivery_id for e, _ in get_outbox().waiting()})
    ids.update({e.key: e.delivery_id for e, _, _ in get_outbox().pending()})
    return ids


ERROR = "ConnectionError: gateway down (card_number=[redacted], token=[redacted])"


def test_the_listing_shows_pending_retrying_and_dead(backend: Any) -> None:
    ids = _three_kinds()
    lines = run("xsm_outbox").out.splitlines()
    assert len(lines) == 4
    pending, retrying, dead, stats = lines
    assert pending.startswith(
        f"pending   shipment:1  order.paid  attempts 0  delivery {ids['shipment:1']}  "
        "(not taken yet, idle "
    )
    assert re.fullmatch(
        rf"retrying  mute:2  mute\.ping  attempts 1  delivery {ids['mute:2']}  retry at "
        rf"\S+Z \(in (59s\d*ms|1m|\d+ms|\d+s\d*ms)\)  last error: {re.escape(ERROR)}",
        retrying,
    ), retrying
    assert dead.startswith(
        f"dead      mute:1  mute.ping  attempts 1  delivery {ids['mute:1']}  since "
    )
    assert dead.endswith(f"  last error: {ERROR}")
    assert re.fullmatch(r"pending=1 retrying=1 dead=1 lag_ms=\d+", stats)


def test_the_json_document_has_the_stats_and_redacted_events(backend: Any) -> None:
    ids = _three_kinds()
    found = json.loads(run("xsm_outbox", "--json").out)
    assert set(found) == {"stats", "pending", "retrying", "dead"}
    assert {k: v for k, v in found["stats"].items() if k != "lag_ms"} == {
        "pending": 1,
        "retrying": 1,
        "dead": 1,
    }
    (pending,) = found["pending"]
    assert pending["event"] == {"type": "order.paid", "amount": 7, "card_number": "[redacted]"}
    assert (pending["delivery_id"], pending["machine"], pending["consumer"]) == (
        ids["shipment:1"],
        "shipment",
        "",
    )
    (retrying,) = found["retrying"]
    assert retrying["attempts"] == 1 and retrying["last_error"] == ERROR
    assert 0 < retrying["retry_in_ms"] <= 60_000
    (dead,) = found["dead"]
    assert dead["key"] == "mute:1" and dead["dead_at"].endswith("Z")
    assert json.loads(run("xsm_outbox", "--json", "--limit", "1").out)["dead"][0] == dead


def test_redrive_one_keeps_its_delivery_id_and_starts_its_attempts_again(backend: Any) -> None:
    ids = _three_kinds()
    dry = run("xsm_outbox", "--redrive", ids["mute:1"], "--dry-run").out
    assert dry.strip() == f"Would redrive {ids['mute:1']} (dry run: nothing moved)"
    assert get_outbox().stats()["dead"] == 1
    out = run("xsm_outbox", "--redrive", ids["mute:1"]).out
    assert out.strip() == f"Redrove {ids['mute:1']}: back in the outbox, attempts from 0"
    back = [e for e, _, _ in get_outbox().pending() if e.key == "mute:1"]
    assert [(e.delivery_id, e.attempts) for e in back] == [(ids["mute:1"], 0)]
    with pytest.raises(CommandError) as info:
        run("xsm_outbox", "--redrive", ids["mute:1"])
    assert str(info.value) == (
        f"No dead letter with delivery id {ids['mute:1']!r} (list them with "
        "`manage.py xsm_outbox`; a redriven entry is back among the pending ones)"
    )
    assert info.value.returncode == 1
    with pytest.raises(CommandError, match="No dead letter with delivery id 'nope'"):
        run("xsm_outbox", "--redrive", "nope", "--dry-run")


def test_redrive_all_and_its_dry_run(backend: Any) -> None:
    handlers.FAIL["flaky"] = -1
    for n in range(3):
        machines["mute"].objects.send(f"mute:{n}", "PING", create=True)
    make_worker(Recorder(0.0), attempts=1)[0].run_batch()
    assert run("xsm_outbox", "--redrive-all", "--dry-run").out.strip() == (
        "Would redrive 3 dead letter(s) (dry run: nothing moved)"
    )
    assert get_outbox().stats()["dead"] == 3
    assert run("xsm_outbox", "--redrive-all").out.strip() == "Redrove 3 dead letter(s)"
    assert get_outbox().stats()["dead"] == 0 and get_outbox().stats()["pending"] == 3
    assert run("xsm_outbox", "--redrive-all").out.strip() == "No dead letters to redrive"
    assert json.loads(run("xsm_outbox", "--redrive-all", "--json").out) == {
        "redriven": 0,
        "dry_run": False,
    }


def _plant_ancient_dead_letter(backend: Any) -> None:
    """A dead letter that died in 1970 (its stream id says when)."""
    ob = get_outbox()
    layout = ob.driver.run(ob.core.state.ensure())
    fields = {"id": "old-0", "k": "mute:9", "m": "mute", "v": 1, "e": '{"type":"mute.ping"}'}
    backend.client.xadd(
        layout.outbox_dead(0), {**fields, "a": 3, "err": "E", "dt": 1000}, id="1000-0"
    )


def test_purge_dead_removes_only_the_old_ones(backend: Any) -> None:
    ids = _three_kinds()
    _plant_ancient_dead_letter(backend)
    assert get_outbox().stats()["dead"] == 2
    assert run("xsm_outbox", "--purge-dead", "--older-than", "30d", "--dry-run").out.strip() == (
        "Would remove 1 dead letter(s) (older than 30d; dry run: nothing removed)"
    )
    assert get_outbox().stats()["dead"] == 2
    out = run("xsm_outbox", "--purge-dead", "--older-than", "30d").out
    assert out.strip() == "Removed 1 dead letter(s) (older than 30d)"
    assert [d.entry.delivery_id for d in get_outbox().dead_letters()] == [ids["mute:1"]]
    again = run("xsm_outbox", "--purge-dead", "--older-than", "1d12h").out
    assert again.strip() == "Nothing to remove (older than 1d12h)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--purge-dead"], "--purge-dead needs --older-than, e.g. --purge-dead --older-than 30d"),
        (["--older-than", "30d"], "--older-than goes with --purge-dead"),
        (["--dry-run"], "--dry-run goes with --redrive, --redrive-all or --purge-dead"),
        (
            ["--redrive", "x", "--redrive-all"],
            "Error: argument --redrive-all: not allowed with argument --redrive",
        ),
        (
            ["--purge-dead", "--older-than", "30"],
            "Error: argument --older-than: Invalid --older-than '30': use a whole number",
        ),
    ],
)
def test_bad_arguments_are_refused_with_the_fix(
    backend: Any, args: list[str], message: str
) -> None:
    with pytest.raises(CommandError) as info:
        run("xsm_outbox", *args)
    assert str(info.value).startswith(message)


def test_an_empty_outbox(backend: Any) -> None:
    assert run("xsm_outbox").out.strip() == "pending=0 retrying=0 dead=0 lag_ms=0"
