"""Property tests (hypothesis) over several charts with parallel states,
history, delayed transitions, guards and context-changing actions."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from django_xsm.engine import Instance, Machine, MachineLogic, create_machine
from django_xsm.exceptions import MicrostepLimitError

from .reference.cases import build
from .reference.charts import random_case


def bump(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["n"] = ctx.get("n", 0) + (action.params or {}).get("by", 1)
    ctx.setdefault("seen", []).append(event.type)


LOGIC = MachineLogic(
    actions={"bump": bump},
    guards={
        "even": lambda c, e: c.get("n", 0) % 2 == 0,
        "small": lambda c, e, p: c.get("n", 0) < p["max"],
    },
    delays={"SOON": lambda c, e: 100 + c.get("n", 0)},
)

WORKFLOW: dict[str, Any] = {
    "id": "wf",
    "initial": "draft",
    "context": {"n": 0},
    "states": {
        "draft": {
            "on": {
                "EDIT": {"actions": "bump"},
                "SUBMIT": [{"target": "review", "guard": "even"}, {"target": "draft.rejected"}],
            },
            "initial": "clean",
            "states": {"clean": {"on": {"EDIT": "dirty"}}, "dirty": {}, "rejected": {}},
        },
        "review": {
            "type": "parallel",
            "after": {
                "5000": "#wf.draft",
                "SOON": {"actions": {"type": "bump", "params": {"by": 3}}},
            },
            "on": {"CANCEL": "draft.hist", "PAUSE": "paused"},
            "onDone": "published",
            "states": {
                "legal": {
                    "initial": "waiting",
                    "states": {
                        "waiting": {
                            "on": {"OK": "ok", "EDIT": {"target": "waiting", "reenter": True}}
                        },
                        "ok": {"type": "final"},
                    },
                },
                "tech": {
                    "initial": "waiting",
                    "states": {
                        "hist": {"type": "history", "history": "deep"},
                        "waiting": {"on": {"OK": "checking"}},
                        "checking": {
                            "initial": "a",
                            "states": {
                                "a": {"on": {"NEXT": "b"}},
                                "b": {"on": {"NEXT": "#wf.review.tech.ok"}},
                            },
                        },
                        "ok": {"type": "final"},
                    },
                },
            },
        },
        "paused": {"on": {"RESUME": "review.tech.hist", "ANY.*": {"actions": "bump"}}},
        "published": {"type": "final"},
    },
}
WORKFLOW["states"]["draft"]["states"]["hist"] = {"type": "history"}

COUNTER: dict[str, Any] = {
    "id": "c",
    "initial": "idle",
    "context": {"n": 0},
    "states": {
        "idle": {"on": {"GO": "run", "*": {"actions": "bump"}}},
        "run": {
            "always": [{"target": "idle", "guard": {"type": "small", "params": {"max": -1}}}],
            "after": {"10": "idle", "20": "run"},
            "on": {
                "TICK": {
                    "actions": [
                        "bump",
                        {"type": "xstate.raise", "event": {"type": "TOCK"}},
                    ]
                },
                "TOCK": {"target": "run", "reenter": True},
                "STOP": "idle",
            },
        },
    },
}

ACTIONLESS: dict[str, Any] = {
    "id": "p",
    "type": "parallel",
    "states": {
        "a": {
            "initial": "a1",
            "states": {
                "h": {"type": "history", "history": "deep"},
                "a1": {"on": {"X": "a2", "Y": "#p.a.a3.deep"}},
                "a2": {"on": {"X": "a1"}, "after": {"100": "a1"}},
                "a3": {
                    "initial": "top",
                    "states": {"top": {"on": {"X": "deep"}}, "deep": {"on": {"Z": "#p.a.a1"}}},
                },
            },
            "on": {"BACK": ".h"},
        },
        "b": {
            "initial": "b1",
            "states": {
                "b1": {"on": {"Y": "b2", "go.*": "b3"}},
                "b2": {
                    "on": {"Y": {"target": "b1", "actions": {"type": "xstate.raise", "event": "X"}}}
                },
                "b3": {"type": "final"},
            },
        },
    },
}

MACHINES: list[Machine] = [
    create_machine(WORKFLOW, logic=LOGIC),
    create_machine(COUNTER, logic=LOGIC, max_microsteps=200),
    create_machine(ACTIONLESS),
]


def events_for(machine: Machine) -> list[str]:
    names = [e for e in machine.events if "*" not in e and not e.startswith("xstate.done")]
    return sorted(set(names) | {"UNKNOWN", "ANY.thing", "go.now", "X", "Y", "Z"})


def event_lists(machine: Machine) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(events_for(machine)), max_size=25)


def clock() -> int:
    return 1_000


def outcome(instance: Instance, event: str) -> Any:
    try:
        receipt = instance.send(event)
    except Exception as exc:  # the same error must happen on both sides
        return ("error", type(exc).__name__)
    return (receipt.accepted, receipt.changed, receipt.value, receipt.status, receipt.transitions)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_restore_of_snapshot_behaves_like_the_original(data: st.DataObject) -> None:
    machine = data.draw(st.sampled_from(MACHINES))
    events = data.draw(event_lists(machine))
    cut = data.draw(st.integers(min_value=0, max_value=len(events)))
    original = machine.start(clock=clock)
    for event in events[:cut]:
        outcome(original, event)
    copy_ = machine.restore(json.loads(json.dumps(original.snapshot())), clock=clock)
    assert copy_.snapshot() == original.snapshot()
    for event in events[cut:]:
        assert outcome(copy_, event) == outcome(original, event)
        assert copy_.snapshot() == original.snapshot()


def expected_value(machine: Machine, active: set[str]) -> Any:
    """Independent XState value builder over the active ids."""

    def value(node: Any) -> Any:
        kids = [c for c in node.children if c.id in active]
        if node.type == "compound":
            child = kids[0]
            return child.key if child.type in ("atomic", "final") else {child.key: value(child)}
        if node.type == "parallel":
            return {c.key: value(c) for c in kids}
        return {}

    return value(machine.root)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_value_state_ids_and_matches_agree(data: st.DataObject) -> None:
    machine = data.draw(st.sampled_from(MACHINES))
    instance = machine.start(clock=clock)
    for event in data.draw(event_lists(machine)):
        outcome(instance, event)
        active = set(instance.state_ids)
        assert list(instance.state_ids) == [n.id for n in machine.nodes if n.id in active]
        assert instance.state_ids[0] == machine.root.id
        assert instance.value == expected_value(machine, active)
        for node in machine.nodes:
            if node.type != "history":
                assert instance.matches(node.id) is (node.id in active), node.id
        for sid in active:  # closed under parents
            parent = machine.get_state(sid).parent
            assert parent is None or parent.id in active


@settings(max_examples=150, deadline=None)
@given(events=event_lists(MACHINES[2]))
def test_pure_transition_agrees_with_send_without_actions(events: list[str]) -> None:
    machine = MACHINES[2]
    instance = machine.start(clock=clock)
    snapshot = machine.initial_snapshot(now=1_000).snapshot
    assert snapshot == instance.snapshot()
    for event in events:
        receipt = instance.send(event)
        result = machine.transition(snapshot, event, now=1_000)
        assert (result.accepted, result.changed) == (receipt.accepted, receipt.changed)
        assert result.transitions == receipt.transitions
        assert result.actions == ()
        snapshot = result.snapshot
        assert snapshot == instance.snapshot()


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_changed_means_the_snapshot_differs(data: st.DataObject) -> None:
    machine = data.draw(st.sampled_from(MACHINES))
    instance = machine.start(clock=clock)
    for event in data.draw(event_lists(machine)):
        before = instance.snapshot()
        try:
            receipt = instance.send(event)
        except Exception:
            assert instance.snapshot() == before  # failures roll back
            continue
        after = instance.snapshot()
        assert receipt.changed is (after != before), event
        if not receipt.accepted:
            assert receipt.transitions == ()


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10**9))
def test_every_snapshot_restores_to_the_same_state_and_the_same_next_step(seed: int) -> None:
    """Over the random charts of the XState differential (tests/engine/
    reference/charts.py: parallel states, history, timers, guards, assigns,
    raises): after every step the snapshot, through JSON, restores to an
    instance with the identical snapshot that then does exactly what the
    original does (receipt, action calls, emitted events, next snapshot)."""
    case = random_case(seed)
    machine, calls = build(case)
    now = [0]
    try:
        original = machine.start(clock=lambda: now[0])
    except MicrostepLimitError:
        return
    calls.take()
    for step in case["steps"]:
        snapshot = json.loads(json.dumps(original.snapshot()))
        copy_ = machine.restore(snapshot, clock=lambda: now[0])
        assert copy_.snapshot() == snapshot
        if "advance" in step:
            due = sorted(original.deadlines, key=lambda d: d.due_ms)
            if not due:
                continue
            now[0] = max(now[0], due[0].due_ms)
            event: Any = due[0].event_type
        else:
            event = step["event"]
        results = []
        for instance in (original, copy_):
            try:
                receipt = instance.send(event)
                got: Any = (receipt.accepted, receipt.changed, receipt.transitions, receipt.emitted)
            except MicrostepLimitError as exc:
                got = ("error", exc.limit)
            results.append((got, calls.take(), instance.snapshot()))
        assert results[0] == results[1]
