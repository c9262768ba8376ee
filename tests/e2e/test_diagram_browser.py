"""The state diagram in a real browser (headless Debian chromium), drawn
by Graphviz and by the built-in layout: a compound chart, a parallel
chart and a history chart on the XSM instance page, and an order on its
model admin change page. Each shows its arrows, its active states and the
path the instance took; screenshots of each go to
``$XSM_ARTIFACTS/screenshots`` (``test_…--<chart>-<renderer>.png``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings as django_settings

from django_xsm.diagram import chart_graph
from django_xsm.registry import machines
from tests.diagram.support import need_dot
from tests.e2e.conftest import screenshot_dir
from tests.e2e.test_admin_browser import PERMS, log_in, make_user
from tests.fieldapp.models import Order

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
expect = pytest.importorskip("playwright.sync_api").expect

CHARTS = {
    "store": "tests.diagram.charts.compound",
    "editor": "tests.diagram.charts.parallel",
    "player": "tests.diagram.charts.history",
}
#: chart -> (events, the active leaf after them, the (source, target, steps)
#: of the arrows the path must show)
WALKS: dict[str, tuple[list[str], str, set[tuple[str, str, str]]]] = {
    "store": (
        ["CHECKOUT", "NEXT", "RETRY", "PAY"],
        "store.paid.packing",
        {
            ("store.cart", "store.checkout", "1"),
            ("store.checkout.address", "store.checkout.payment", "2"),
            ("store.checkout.payment", "store.checkout.payment", "3"),
            ("store.checkout.payment", "store.checkout.done", "4"),
            ("store.checkout", "store.paid", "4"),
        },
    ),
    "editor": (
        ["TOGGLE_BOLD", "BULLETS", "NONE", "NUMBERS"],
        "editor.editing.list.numbers",
        {
            ("editor.editing.bold.off", "editor.editing.bold.on", "1"),
            ("editor.editing.list.none", "editor.editing.list.bullets", "2"),
            ("editor.editing.list.bullets", "editor.editing.list.none", "3"),
            ("editor.editing.list.none", "editor.editing.list.numbers", "4"),
        },
    ),
    "player": (
        ["FAST", "PAUSE", "POWER", "POWER"],
        "player.on.paused",
        {
            ("player.on.playing.normal", "player.on.playing.fast", "1"),
            ("player.on.playing", "player.on.paused", "2"),
            ("player.on", "player.off", "3"),
            ("player.off", "player.on.hist", "4"),
        },
    ),
}


@pytest.fixture(params=["graphviz", "builtin"])
def renderer(request: pytest.FixtureRequest, backend: Any, xsm: Any) -> str:
    if request.param == "graphviz":
        need_dot()
    xsm(
        MACHINES={**django_settings.XSM["MACHINES"], **CHARTS},
        DIAGRAM={"RENDERER": request.param},
    )
    return str(request.param)


def seed(name: str, key: str) -> None:
    events = WALKS[name][0]
    objects = machines[name].objects
    with objects.open(key, actor="seed") as block:
        block.send(events[0])
    for event in events[1:]:
        objects.send(key, event, actor="seed")


def edges(page: Any, scope: str = "svg.xsm-diagram") -> list[dict[str, str]]:
    found: list[dict[str, str]] = page.evaluate(
        """(scope) => [...document.querySelectorAll(scope + ' g.xsm-edge')].map(g => ({
             source: g.dataset.source, target: g.dataset.target, steps: g.dataset.steps,
             drawn: g.querySelector('path, polyline') !== null,
             badge: (g.querySelector('.xsm-step-badge text') || {}).textContent || ''}))""",
        scope,
    )
    return found


def save(page: Any, locator: Any, name: str) -> None:
    locator.screenshot(path=str(screenshot_dir() / f"test_diagram--{name}.png"))


@pytest.mark.parametrize("name", list(CHARTS))
def test_the_instance_page_draws_the_chart_and_the_path(
    renderer: str, name: str, live_admin: str, page: Any, shot: Any
) -> None:
    make_user("olga", *PERMS)
    key = f"{name}:1"
    seed(name, key)
    log_in(page, live_admin, "olga")
    page.goto(f"{live_admin}/admin/django_xsm/instance/m/{name}/instance/?key={key}")
    svg = page.locator("#xsm-diagram svg.xsm-diagram")
    expect(svg).to_be_visible()
    assert svg.get_attribute("data-renderer") == renderer

    machine = machines[name].machine
    drawn = edges(page)
    assert len(drawn) == len(chart_graph(machine).edges) and all(e["drawn"] for e in drawn)
    states = page.locator("svg.xsm-diagram g.xsm-state")
    assert sorted(states.evaluate_all("gs => gs.map(g => g.dataset.stateId)")) == sorted(
        n.id for n in machine.nodes
    )
    leaf = WALKS[name][1]
    active = page.locator("svg.xsm-diagram g.xsm-active")
    ids = set(active.evaluate_all("gs => gs.map(g => g.dataset.stateId)"))
    assert leaf in ids and machine.id not in ids
    assert ids == {s for s in machines[name].objects.get(key).state_ids if s != machine.id}
    # the path: the arrows taken, numbered by the log records shown below
    taken = {(e["source"], e["target"], e["steps"]) for e in drawn if e["steps"]}
    assert taken == WALKS[name][2]
    assert all(e["badge"] == e["steps"] for e in drawn if e["steps"])
    seqs = page.locator("#xsm-timeline tr.xsm-log-row").evaluate_all(
        "rows => rows.map(r => r.dataset.seq)"
    )
    assert {s for _, _, s in taken} <= set(seqs)
    assert "numbered by their #" in page.locator("#xsm-diagram-legend").inner_text()
    # the boxes render where the browser put them: the active leaf is visible
    box = page.locator(f'svg.xsm-diagram g[data-state-id="{leaf}"]').bounding_box()
    assert box is not None and box["width"] > 20 and box["height"] > 10
    save(page, page.locator("#xsm-diagram"), f"{name}-{renderer}")
    shot(f"{name}-{renderer}-page")


def test_the_change_page_draws_the_same_chart(
    renderer: str, live_admin: str, page: Any, shot: Any
) -> None:
    from tests.e2e.test_model_admin import make_clerk

    make_clerk("cleo")
    order = Order.objects.create(total=42)
    with order.status.open(actor="shop", context={"items": 0}) as chart:
        chart.send("ADD", n=2)
    order.status.send("PAY", amount=42)
    page.goto(f"{live_admin}/shop-admin/login/?next=/shop-admin/fieldapp/order/{order.pk}/change/")
    page.fill("#id_username", "cleo")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    panel = page.locator("#xsm-status")
    svg = panel.locator("svg.xsm-diagram")
    expect(svg).to_be_visible()
    assert svg.get_attribute("data-renderer") == renderer
    assert panel.locator("svg.xsm-diagram g.xsm-active").get_attribute("data-state-id") == (
        "shop.paid"
    )
    drawn = edges(page, "#xsm-status svg.xsm-diagram")
    assert len(drawn) == len(chart_graph(machines["shop"].machine).edges)
    taken = sorted((e["target"], e["steps"]) for e in drawn if e["steps"])
    assert taken[-1] == ("shop.paid", "2") and re.fullmatch(r"\d", taken[0][1])
    save(page, panel.locator(".xsm-chart"), f"change-page-{renderer}")
    shot(f"change-page-{renderer}")
