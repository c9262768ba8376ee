"""Run-to-completion: always, xstate.raise, done events, onDone, the microstep cap."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import MicrostepLimitError

from .conftest import Recorder


def test_eventless_transitions_run_before_raised_events() -> None:
    rec = Recorder("log")
    config = {
        "id": "r",
        "initial": "a",
        "states": {
            "a": {
                "on": {
                    "E": {
                        "target": "b",
                        "actions": [
                            {"type": "xstate.raise", "event": "R1"},
                            {"type": "xstate.raise", "event": {"type": "R2", "n": 1}},
                            "log",
                        ],
                    }
                }
            },
            "b": {"always": {"target": "c", "actions": "log"}, "on": {"R1": "wrong"}},
            "c": {"on": {"R1": {"target": "d", "actions": "log"}, "R2": "wrong"}},
            "d": {"on": {"R2": {"target": "e", "actions": "log"}}},
            "e": {},
            "wrong": {},
        },
    }
    inst = create_machine(config, logic=rec.logic()).start()
    receipt = inst.send("E")
    assert receipt.value == "e"
    # the always transition sees the event being processed (XState)
    assert rec.take() == [("log", "E"), ("log", "E"), ("log", "R1"), ("log", "R2")]
    assert [(t.source_id, t.event) for t in receipt.transitions] == [
        ("r.a", "E"),
        ("r.b", ""),
        ("r.c", "R1"),
        ("r.d", "R2"),
    ]


def test_raised_event_payload_reaches_guards() -> None:
    config = {
        "id": "r",
        "initial": "a",
        "states": {
            "a": {
                "on": {
                    "E": {"actions": {"type": "xstate.raise", "event": {"type": "R", "ok": True}}},
                    "R": {"target": "b", "guard": "ok"},
                }
            },
            "b": {},
        },
    }
    logic = MachineLogic(guards={"ok": lambda c, e: e.get("ok") is True})
    assert create_machine(config, logic=logic).start().send("E").value == "b"


def test_always_with_guards_chain_at_start() -> None:
    config = {
        "id": "c",
        "initial": "check",
        "context": {"n": 2},
        "states": {
            "check": {
                "always": [
                    {"target": "many", "guard": "many"},
                    {"target": "few"},
                ]
            },
            "many": {},
            "few": {"always": {"target": "many", "guard": "many"}},
        },
    }
    logic = MachineLogic(guards={"many": lambda c, e: c["n"] > 3})
    machine = create_machine(config, logic=logic)
    assert machine.start().value == "few"
    assert machine.start({"n": 9}).value == "many"


def test_always_loop_hits_the_microstep_cap_and_rolls_back() -> None:
    config = {
        "id": "loop",
        "initial": "a",
        "states": {"a": {"on": {"GO": "b"}}, "b": {"always": "c"}, "c": {"always": "b"}},
    }
    inst = create_machine(config, max_microsteps=25).start()
    with pytest.raises(MicrostepLimitError) as info:
        inst.send("GO")
    assert info.value.limit == 25
    assert "More than 25 microsteps" in str(info.value)
    assert inst.value == "a"


def test_targetless_always_with_context_change_loops_until_guard_fails() -> None:
    def inc(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        ctx["n"] += 1

    config = {
        "id": "count",
        "initial": "a",
        "context": {"n": 0},
        "states": {"a": {"always": {"guard": "below", "actions": "inc"}}},
    }
    logic = MachineLogic(actions={"inc": inc}, guards={"below": lambda c, e: c["n"] < 10})
    assert create_machine(config, logic=logic).start().context == {"n": 10}


def test_targetless_always_without_change_runs_once_per_macrostep() -> None:
    seen: list[str] = []
    config = {
        "id": "t",
        "initial": "a",
        "states": {"a": {"always": {"actions": "side"}, "on": {"E": {}}}},
    }
    logic = MachineLogic(actions={"side": lambda i, c, e, a: seen.append(e.type)})
    inst = create_machine(config, logic=logic).start()
    inst.send("E")
    assert seen == ["xstate.init", "E"]


def inc(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["n"] += 1


def test_an_eventless_transition_that_raises_and_assigns_is_selected_again_first() -> None:
    """Eventless transitions are selected again after one that changed the
    context, whatever else its microstep did (here: raised an event): all
    three run (seeing xstate.init) before the three raised events."""
    rec = Recorder("logE1")
    config = {
        "id": "m",
        "initial": "s1",
        "context": {"n": 0},
        "states": {
            "s1": {
                "always": {
                    "guard": "below",
                    "actions": [{"type": "xstate.raise", "event": {"type": "E1"}}, "inc"],
                },
                "on": {"E1": {"actions": "logE1"}},
            }
        },
    }
    logic = rec.logic(actions={"inc": rec_inc(rec)}, guards={"below": lambda c, e: c["n"] < 3})
    inst = create_machine(config, logic=logic).start()
    assert inst.context == {"n": 3}
    assert rec.take() == [("inc", "xstate.init")] * 3 + [("logE1", "E1")] * 3


def rec_inc(rec: Recorder) -> Any:
    def run(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        rec.calls.append(("inc", event.type))
        ctx["n"] += 1

    return run


@pytest.mark.parametrize(
    "always",
    [
        # re-enters its state: cancels and arms its timer
        {"target": "a", "reenter": True, "guard": "below", "actions": "inc"},
        # emits an event
        {"guard": "below", "actions": [{"type": "xstate.emit", "event": "tick"}, "inc"]},
    ],
    ids=["re-arms-a-timer", "emits"],
)
def test_an_eventless_transition_that_assigns_is_selected_again_whatever_else_it_does(
    always: dict[str, Any],
) -> None:
    config = {
        "id": "m",
        "initial": "a",
        "context": {"n": 0},
        "states": {"a": {"after": {"100": "b"}, "always": always, "on": {"GO": "a"}}, "b": {}},
    }
    logic = MachineLogic(actions={"inc": inc}, guards={"below": lambda c, e: c["n"] < 3})
    machine = create_machine(config, logic=logic)
    inst = machine.start(clock=lambda: 0)
    assert inst.context == {"n": 3}
    assert len(inst.deadlines) == 1
    # the same through the pure API, whose actions do not run: the guard
    # sees the start context, so the transition is taken once per macrostep
    result = machine.initial_snapshot(now=0)
    assert [a.type for a in result.actions].count("inc") == 1


def test_an_assign_that_writes_the_value_already_there_changes_nothing() -> None:
    """The context is compared by value: the second run of this eventless
    transition leaves it as it was, so it is not selected again (XState
    takes any assign as a change and loops; docs/engine.md)."""
    calls: list[int] = []

    def set_one(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        calls.append(ctx["n"])
        ctx["n"] = 1

    config = {
        "id": "m",
        "initial": "a",
        "context": {"n": 0},
        "states": {"a": {"always": {"actions": "set"}, "on": {"E": {}}}},
    }
    inst = create_machine(config, logic=MachineLogic(actions={"set": set_one})).start()
    assert inst.context == {"n": 1} and calls == [0, 1]
    assert inst.send("E").changed is False and calls == [0, 1, 1]


def test_raise_loop_hits_the_cap() -> None:
    config = {
        "id": "r",
        "initial": "a",
        "states": {"a": {"on": {"E": {"actions": {"type": "xstate.raise", "event": "E"}}}}},
    }
    with pytest.raises(MicrostepLimitError):
        create_machine(config, max_microsteps=10).start().send("E")


DONE: dict[str, Any] = {
    "id": "m",
    "initial": "work",
    "exit": "exit_m",
    "states": {
        "work": {
            "type": "parallel",
            "onDone": {"target": "finished", "actions": "on_done"},
            "exit": "exit_work",
            "states": {
                "a": {
                    "initial": "a1",
                    "onDone": {"actions": "a_done"},
                    "states": {"a1": {"on": {"A": "a2"}}, "a2": {"type": "final"}},
                },
                "b": {
                    "initial": "b1",
                    "states": {"b1": {"on": {"B": "b2"}}, "b2": {"type": "final"}},
                },
            },
        },
        "finished": {"type": "final", "entry": "enter_finished", "exit": "exit_finished"},
    },
}


def test_done_events_on_done_and_root_completion() -> None:
    rec = Recorder("exit_m", "on_done", "exit_work", "a_done", "enter_finished", "exit_finished")
    inst = create_machine(DONE, logic=rec.logic()).start()
    receipt = inst.send("A")
    assert rec.take() == [("a_done", "xstate.done.state.m.work.a")]
    assert receipt.status == "active"
    receipt = inst.send("B")
    assert inst.status == "done" and inst.value == "finished"
    assert [t.event for t in receipt.transitions] == ["B", "xstate.done.state.m.work"]
    # XState runs every remaining exit action when the machine finishes
    assert rec.take() == [
        ("exit_work", "xstate.done.state.m.work"),
        ("on_done", "xstate.done.state.m.work"),
        ("enter_finished", "xstate.done.state.m.work"),
        ("exit_finished", "xstate.done.state.m.work"),
        ("exit_m", "xstate.done.state.m.work"),
    ]


def test_final_state_in_nested_compound_is_not_machine_done() -> None:
    config = {
        "id": "m",
        "initial": "a",
        "states": {
            "a": {
                "initial": "a1",
                "onDone": "b",
                "states": {"a1": {"on": {"E": "a2"}}, "a2": {"type": "final"}},
            },
            "b": {},
        },
    }
    inst = create_machine(config).start()
    receipt = inst.send("E")
    assert receipt.value == "b" and receipt.status == "active"


def test_root_parallel_with_final_regions_finishes() -> None:
    config = {
        "id": "m",
        "type": "parallel",
        "states": {
            "a": {"initial": "x", "states": {"x": {"on": {"E": "y"}}, "y": {"type": "final"}}},
            "b": {"type": "final"},
        },
    }
    inst = create_machine(config).start()
    assert inst.status == "active"
    assert inst.send("E").status == "done"


def test_wildcard_catches_done_events_like_xstate() -> None:
    config = {
        "id": "m",
        "initial": "a",
        "on": {"*": {"actions": "seen"}},
        "states": {
            "a": {"initial": "x", "states": {"x": {"on": {"E": "y"}}, "y": {"type": "final"}}}
        },
    }
    rec = Recorder("seen")
    create_machine(config, logic=rec.logic()).start().send("E")
    # E is taken by the inner state; the done event falls through to "*"
    assert rec.take() == [("seen", "xstate.done.state.m.a")]
