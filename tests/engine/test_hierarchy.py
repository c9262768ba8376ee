"""Compound and parallel states, targets, ordering, reenter, wildcards, guards."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine

from .conftest import Recorder

NESTED: dict[str, Any] = {
    "id": "m",
    "initial": "a",
    "entry": "enter_m",
    "states": {
        "a": {
            "initial": "a1",
            "entry": "enter_a",
            "exit": "exit_a",
            "on": {
                "TO_B": {"target": "b", "actions": "t"},
                "TO_A2": ".a2",
                "TO_DEEP": "b.b2",
                "TO_ID": "#special",
                "SELF": {"target": "a", "actions": "t"},
                "SELF_REENTER": {"target": "a", "reenter": True, "actions": "t"},
            },
            "states": {
                "a1": {"entry": "enter_a1", "exit": "exit_a1", "on": {"NEXT": "a2"}},
                "a2": {"entry": "enter_a2", "exit": "exit_a2"},
            },
        },
        "b": {
            "initial": "b1",
            "entry": "enter_b",
            "exit": "exit_b",
            "states": {"b1": {}, "b2": {}, "b3": {"id": "special"}},
        },
    },
}
NAMES = [
    "enter_m",
    "enter_a",
    "exit_a",
    "enter_a1",
    "exit_a1",
    "enter_a2",
    "exit_a2",
    "enter_b",
    "exit_b",
    "t",
]


@pytest.fixture
def rec() -> Recorder:
    return Recorder(*NAMES)


def start(rec: Recorder, config: dict[str, Any] = NESTED) -> Any:
    return create_machine(config, logic=rec.logic()).start()


def test_initial_entry_order_is_document_order(rec: Recorder) -> None:
    inst = start(rec)
    assert rec.take() == [
        ("enter_m", "xstate.init"),
        ("enter_a", "xstate.init"),
        ("enter_a1", "xstate.init"),
    ]
    assert inst.value == {"a": "a1"}
    assert inst.state_ids == ("m", "m.a", "m.a.a1")


def test_exit_inner_first_then_transition_then_entry(rec: Recorder) -> None:
    inst = start(rec)
    rec.take()
    inst.send("TO_B")
    assert [n for n, _ in rec.take()] == ["exit_a1", "exit_a", "t", "enter_b"]
    assert inst.value == {"b": "b1"}


def test_target_forms(rec: Recorder) -> None:
    inst = start(rec)
    assert inst.send("TO_A2").value == {"a": "a2"}  # .child
    inst = start(rec)
    assert inst.send("TO_DEEP").value == {"b": "b2"}  # sibling path
    inst = start(rec)
    assert inst.send("TO_ID").value == {"b": "b3"}  # #explicit-id
    assert inst.state_ids == ("m", "m.b", "special")
    assert inst.matches("b.b3") and inst.matches("#special") and inst.matches("special")


def test_self_transition_without_reenter_resets_children_only(rec: Recorder) -> None:
    inst = start(rec)
    inst.send("NEXT")
    rec.take()
    inst.send("SELF")  # XState v5 default reenter: false
    assert [n for n, _ in rec.take()] == ["exit_a2", "t", "enter_a1"]
    assert inst.value == {"a": "a1"}


def test_self_transition_with_reenter_exits_and_enters_the_source(rec: Recorder) -> None:
    inst = start(rec)
    rec.take()
    inst.send("SELF_REENTER")
    assert [n for n, _ in rec.take()] == ["exit_a1", "exit_a", "t", "enter_a", "enter_a1"]


PARALLEL: dict[str, Any] = {
    "id": "p",
    "initial": "work",
    "states": {
        "work": {
            "type": "parallel",
            "on": {"RESET": "#p.work"},
            "states": {
                "left": {"initial": "l1", "states": {"l1": {"on": {"GO": "l2"}}, "l2": {}}},
                "right": {"initial": "r1", "states": {"r1": {"on": {"GO": "r2"}}, "r2": {}}},
                "flag": {},
            },
        },
        "other": {},
    },
}


def test_parallel_value_state_ids_and_atomic_region() -> None:
    inst = create_machine(PARALLEL).start()
    assert inst.value == {"work": {"left": "l1", "right": "r1", "flag": {}}}
    assert inst.state_ids == (
        "p",
        "p.work",
        "p.work.left",
        "p.work.left.l1",
        "p.work.right",
        "p.work.right.r1",
        "p.work.flag",
    )
    receipt = inst.send("GO")  # both regions take a transition in one microstep
    assert receipt.value == {"work": {"left": "l2", "right": "r2", "flag": {}}}
    assert [t.source_id for t in receipt.transitions] == ["p.work.left.l1", "p.work.right.r1"]
    assert inst.matches("work.left.l2") and inst.matches("p.work.flag")


def test_root_parallel_value_is_a_dict() -> None:
    inst = create_machine({"id": "r", "type": "parallel", "states": {"x": {}, "y": {}}}).start()
    assert inst.value == {"x": {}, "y": {}}
    assert create_machine({"id": "solo"}).start().value == {}


def test_multiple_targets_into_parallel_regions() -> None:
    config = {
        "id": "m",
        "initial": "idle",
        "states": {
            "idle": {"on": {"GO": {"target": ["#m.p.a.a2", "#m.p.b.b2"]}}},
            "p": {
                "type": "parallel",
                "states": {
                    "a": {"initial": "a1", "states": {"a1": {}, "a2": {}}},
                    "b": {"initial": "b1", "states": {"b1": {}, "b2": {}}},
                    "c": {"initial": "c1", "states": {"c1": {}, "c2": {}}},
                },
            },
        },
    }
    inst = create_machine(config).start()
    assert inst.send("GO").value == {"p": {"a": "a2", "b": "b2", "c": "c1"}}


def test_parent_transition_only_when_children_have_none() -> None:
    config = {
        "id": "m",
        "initial": "a",
        "states": {
            "a": {
                "initial": "a1",
                "on": {"E": "b"},
                "states": {"a1": {"on": {"E": "a2"}}, "a2": {}},
            },
            "b": {},
        },
    }
    inst = create_machine(config).start()
    assert inst.send("E").value == {"a": "a2"}  # the inner transition wins
    assert inst.send("E").value == "b"  # a2 has none: the parent's


WILDCARDS: dict[str, Any] = {
    "id": "w",
    "initial": "s",
    "states": {
        "s": {
            "on": {
                "*": "any",
                "foo": "exact",
                "foo.*": "prefix",
                "foo.bar.*": "longer",
            }
        },
        "any": {},
        "exact": {},
        "prefix": {},
        "longer": {},
    },
}


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ("foo", "exact"),  # exact beats wildcards whatever the order
        ("foo.x", "prefix"),
        ("foo.bar", "longer"),  # "foo.bar.*" matches "foo.bar" itself (XState)
        ("foo.bar.baz", "longer"),  # longer descriptor first
        ("food", "any"),  # token prefix, not string prefix
        ("other", "any"),
    ],
)
def test_wildcard_ranking_follows_xstate(event: str, expected: str) -> None:
    inst = create_machine(WILDCARDS).start()
    assert inst.send(event).value == expected


def test_foo_bar_star_matches_foo_bar_itself() -> None:
    config = {
        "id": "w",
        "initial": "s",
        "states": {"s": {"on": {"foo.*": "short", "foo.bar.*": "long"}}, "short": {}, "long": {}},
    }
    assert create_machine(config).start().send("foo.bar").value == "long"


FALLBACK: dict[str, Any] = {
    "id": "w",
    "initial": "s",
    "states": {
        "s": {
            "on": {"*": "any", "E": {"target": "e", "guard": "no"}, "a.*": "prefix"},
            "after": {"100": {"target": "e", "guard": "no"}},
        },
        "any": {},
        "prefix": {},
        "e": {},
    },
}
NO = MachineLogic(guards={"no": lambda c, e: False})


def test_exact_match_comes_first_and_wildcards_catch_what_its_guards_refuse() -> None:
    """XState 5.32.2+ (statelyai/xstate#5548): when every guard of the exact
    descriptor fails, the matching wildcards are tried, longest first."""
    machine = create_machine(FALLBACK, logic=NO)
    inst = machine.start()
    assert inst.can("E") is True
    assert inst.refusal("E") == ("", ())
    receipt = inst.send("E", strict=True)
    assert receipt.accepted is True and receipt.value == "any"
    assert [t.event for t in receipt.transitions] == ["*"]
    assert machine.start().send("a.b").value == "prefix"  # "a.*" before "*"


def test_a_wildcard_catches_a_delayed_event_whose_guard_failed() -> None:
    inst = create_machine(FALLBACK, logic=NO).start(clock=lambda: 0)
    (deadline,) = inst.deadlines
    receipt = inst.send(deadline.event_type)
    assert receipt.accepted is True and receipt.value == "any"


def test_a_wildcard_catches_a_done_event_whose_guard_failed() -> None:
    config = {
        "id": "w",
        "initial": "c",
        "states": {
            "c": {
                "initial": "f",
                "states": {"f": {"type": "final"}},
                "onDone": {"target": "#w.done", "guard": "no"},
                "on": {"*": "#w.any"},
            },
            "done": {},
            "any": {},
        },
    }
    assert create_machine(config, logic=NO).start().value == "any"


def test_the_exact_descriptor_wins_when_its_guard_passes() -> None:
    machine = create_machine(FALLBACK, logic=MachineLogic(guards={"no": lambda c, e: True}))
    assert machine.start().send("E").value == "e"


GUARDED: dict[str, Any] = {
    "id": "g",
    "initial": "s",
    "context": {"n": 5},
    "states": {
        "s": {
            "on": {
                "E": [
                    {"target": "big", "guard": {"type": "above", "params": {"min": 10}}},
                    {"target": "mid", "cond": {"type": "above", "params": {"min": 3}}},
                    {"target": "small"},
                ],
                "PLAIN": {"target": "big", "guard": "positive"},
                "EVT": {"target": "big", "guard": "from_event"},
            }
        },
        "big": {},
        "mid": {},
        "small": {},
    },
}


def above(context: dict[str, Any], event: Any, params: Any) -> bool:
    return bool(context["n"] > params["min"])


def test_guards_with_params_cond_alias_and_fallthrough() -> None:
    logic = MachineLogic(
        guards={
            "above": above,
            "positive": lambda c, e: c["n"] > 0,
            "from_event": lambda c, e: e.get("ok", False),
        }
    )
    machine = create_machine(GUARDED, logic=logic)
    assert machine.start().send("E").value == "mid"
    assert machine.start({"n": 50}).send("E").value == "big"
    assert machine.start({"n": 0}).send("E").value == "small"
    assert machine.start().send("PLAIN").value == "big"
    assert not machine.start({"n": 0}).send("PLAIN").accepted
    assert not machine.start().can("EVT")
    assert machine.start().can("EVT", ok=True)
    assert machine.start().send("EVT", ok=True).value == "big"


def test_guard_param_detection_for_methods_partials_and_varargs() -> None:
    class Checks:
        def above(self, context: Any, event: Any, params: Any) -> bool:
            return bool(context["n"] > params["min"])

    def varargs(*args: Any) -> bool:
        context, _event, params = args
        return bool(context["n"] > params["min"])

    def with_extra(context: Any, event: Any, params: Any, scale: int) -> bool:
        return bool(context["n"] * scale > params["min"])

    for fn in (Checks().above, varargs, functools.partial(with_extra, scale=1)):
        logic = MachineLogic(guards={"above": fn, "positive": bool, "from_event": bool})
        assert create_machine(GUARDED, logic=logic).start().send("E").value == "mid", fn


def test_targetless_transition_runs_actions_without_exit_or_entry() -> None:
    rec = Recorder("x", "e", "t")
    config = {
        "id": "m",
        "initial": "s",
        "states": {"s": {"entry": "e", "exit": "x", "on": {"T": {"actions": "t"}}}},
    }
    inst = create_machine(config, logic=rec.logic()).start()
    rec.take()
    receipt = inst.send("T")
    assert rec.take() == [("t", "T")]
    assert receipt.transitions[0].target_ids == ()


def test_null_transition_blocks_the_parent() -> None:
    config = {
        "id": "m",
        "initial": "a",
        "states": {
            "a": {"initial": "a1", "on": {"E": "b"}, "states": {"a1": {"on": {"E": None}}}},
            "b": {},
        },
    }
    receipt = create_machine(config).start().send("E")
    assert receipt.accepted is True and receipt.value == {"a": "a1"}


def test_conflicting_transitions_in_parallel_regions_first_wins() -> None:
    config = {
        "id": "m",
        "initial": "p",
        "states": {
            "p": {
                "type": "parallel",
                "states": {
                    "a": {"initial": "a1", "states": {"a1": {"on": {"E": "#m.x"}}}},
                    "b": {"initial": "b1", "states": {"b1": {"on": {"E": "#m.y"}}}},
                },
            },
            "x": {},
            "y": {},
        },
    }
    receipt = create_machine(config).start().send("E")
    assert receipt.value == "x"
    assert [t.source_id for t in receipt.transitions] == ["m.p.a.a1"]


def test_action_order_across_parallel_regions() -> None:
    rec = Recorder("xa", "xb", "ta", "tb", "ea", "eb")
    config = {
        "id": "m",
        "type": "parallel",
        "states": {
            "a": {
                "initial": "a1",
                "states": {
                    "a1": {"exit": "xa", "on": {"E": {"target": "a2", "actions": "ta"}}},
                    "a2": {"entry": "ea"},
                },
            },
            "b": {
                "initial": "b1",
                "states": {
                    "b1": {"exit": "xb", "on": {"E": {"target": "b2", "actions": "tb"}}},
                    "b2": {"entry": "eb"},
                },
            },
        },
    }
    inst = create_machine(config, logic=rec.logic()).start()
    inst.send("E")
    assert [n for n, _ in rec.take()] == ["xb", "xa", "ta", "tb", "ea", "eb"]
