"""The graph every renderer draws: states, arrows and their labels, the
active configuration, and the path read back from a transition log."""

from __future__ import annotations

from django_xsm.diagram import chart_graph, ids_of_value
from django_xsm.engine import MachineLogic, create_machine
from tests.diagram.charts import compound, history, parallel
from tests.diagram.support import Record, walk


def test_every_state_is_a_node_with_its_kind_and_nesting() -> None:
    graph = chart_graph(compound)
    by_id = {n.state_id: n for n in graph.nodes.values()}
    assert len(by_id) == len(compound.nodes)
    checkout = by_id["store.checkout"]
    assert (checkout.kind, checkout.is_container) == ("compound", True)
    assert [graph.nodes[c].label for c in checkout.children] == ["address", "payment", "done"]
    assert graph.nodes[checkout.initial or ""].label == "address"
    assert by_id["store.checkout.done"].kind == "final"
    assert by_id["store"].parent is None and by_id["store"].label == "store"
    regions = [n for n in chart_graph(parallel).nodes.values() if n.region]
    assert [n.label for n in regions] == ["bold", "list"]
    hist = {n.label: n.deep for n in chart_graph(history).nodes.values() if n.kind == "history"}
    assert hist == {"hist": True, "shallow": False}


def test_each_transition_target_is_an_arrow_with_its_label() -> None:
    graph = chart_graph(compound)
    label = {
        (graph.nodes[e.source].label, graph.nodes[e.target].label, e.label): e for e in graph.edges
    }
    assert set(label) == {
        ("cart", "cart", "ADD"),
        ("cart", "checkout", "CHECKOUT [hasItems]"),
        ("cart", "cancelled", "CANCEL"),
        ("checkout", "paid", "onDone"),
        ("address", "payment", "NEXT"),
        ("address", "cart", "BACK"),
        ("payment", "done", "PAY [paysTotal]"),
        ("payment", "payment", "RETRY"),
        ("payment", "cancelled", "after 60000"),
        ("packing", "ready", "always [inStock]"),
        ("packing", "ready", "PACKED"),
        ("paid", "shipped", "SHIP"),
        ("paid", "refunded", "REFUND"),
    }
    assert label[("cart", "cart", "ADD")].targetless
    assert not label[("payment", "payment", "RETRY")].targetless
    assert label[("checkout", "paid", "onDone")].kind == "onDone"
    assert label[("payment", "cancelled", "after 60000")].description == (
        "checkout.payment: after 60000 → cancelled"
    )


def test_active_states_are_marked() -> None:
    ids, _ = walk(parallel, "BULLETS")
    graph = chart_graph(parallel, ids)
    active = sorted(n.label for n in graph.nodes.values() if n.active)
    assert active == ["bold", "bullets", "editing", "editor", "list", "off"]


def test_the_path_numbers_each_arrow_with_the_log_records_that_took_it() -> None:
    ids, log = walk(compound, "ADD", "CHECKOUT", "NEXT", "RETRY", "PAY", "SHIP")
    graph = chart_graph(compound, ids, log)
    taken = {e.description: e.steps for e in graph.taken}
    assert taken == {
        "cart: ADD (no target)": (1,),
        "cart: CHECKOUT → checkout [hasItems]": (2,),
        "checkout.address: NEXT → checkout.payment": (3,),
        "checkout.payment: RETRY → checkout.payment": (4,),
        # the final state's onDone fired in the same step as PAY
        "checkout.payment: PAY → checkout.done [paysTotal]": (5,),
        "checkout: onDone → paid": (5,),
        "paid: SHIP → shipped": (6,),
    }


def test_the_path_through_history_states_and_repeated_arrows() -> None:
    ids, log = walk(history, "FAST", "PAUSE", "POWER", "POWER", "PLAY", "POWER", "RESET")
    taken = {e.description: e.steps for e in chart_graph(history, ids, log).taken}
    assert taken == {
        "on.playing.normal: FAST → on.playing.fast": (1,),
        "on.playing: PAUSE → on.paused": (2,),
        "on: POWER → off": (3, 6),
        "off: POWER → on.hist": (4,),
        "on.paused: PLAY → on.playing": (5,),
        "off: RESET → on.shallow": (7,),
    }


def test_the_path_in_parallel_regions_and_refused_or_foreign_records() -> None:
    ids, log = walk(parallel, "TOGGLE_BOLD", "BULLETS", "NONE")
    log += [
        Record(4, "SAVE", {"editing": {"bold": "on", "list": "none"}}, "saved", accepted=False),
        # written by an older chart: states it no longer has are skipped
        Record(5, "ZAP", {"gone": "x"}, {"also": "gone"}),
    ]
    taken = {e.description: e.steps for e in chart_graph(parallel, ids, log).taken}
    assert taken == {
        "editing.bold.off: TOGGLE_BOLD → editing.bold.on": (1,),
        "editing.list.none: BULLETS → editing.list.bullets": (2,),
        "editing.list.bullets: NONE → editing.list.none": (3,),
    }


def test_a_guarded_choice_is_told_apart_by_where_it_went() -> None:
    machine = create_machine(
        {
            "id": "m",
            "initial": "a",
            "states": {
                "a": {"on": {"GO": [{"target": "b", "guard": "first"}, {"target": "c"}]}},
                "b": {},
                "c": {},
            },
        },
        logic=MachineLogic(guards={"first": lambda context, event: False}),
    )
    log = [Record(1, "GO", "a", "c")]
    taken = [e.description for e in chart_graph(machine, (), log).taken]
    assert taken == ["a: GO → c"]


def test_ids_of_a_state_value() -> None:
    assert ids_of_value(compound, {"checkout": "payment"}) == {
        "store",
        "store.checkout",
        "store.checkout.payment",
    }
    # a container named without its children stands for its initial ones
    assert "editor.editing.list.none" in ids_of_value(parallel, "editing")
    assert ids_of_value(compound, None) == set()
    assert ids_of_value(compound, None, initial=True) == {"store", "store.cart"}
