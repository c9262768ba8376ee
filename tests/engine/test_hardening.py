"""Outside checks (issue 12): read-only guards, the object form of
``initial``, eventless transitions after refused events, history cycles,
deep data, bounded error messages, delay bounds, non-string keys."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import InvalidConfigError, InvalidEventError, XsmError


def _case(value: Any) -> str:
    """A short test id (pytest's own would print a 5000-digit int)."""
    return type(value).__name__


# -- guards are read-only ------------------------------------------------------


def _coupon_machine(guard: Any) -> Any:
    config = {
        "id": "shop",
        "initial": "cart",
        "context": {"coupon": False, "items": [1]},
        "states": {"cart": {"on": {"PAY": {"target": "paid", "guard": "ok"}}}, "paid": {}},
    }
    return create_machine(config, logic=MachineLogic(guards={"ok": guard}))


def test_guard_cannot_write_the_context() -> None:
    def sneaky(ctx: Any, event: Any) -> bool:
        ctx["coupon"] = True
        return False

    order = _coupon_machine(sneaky).start()
    with pytest.raises(TypeError, match=r"'ok'.*read-only"):
        order.send("PAY")
    assert order.context == {"coupon": False, "items": [1]}
    assert order.value == "cart"


def test_guard_cannot_write_nested_context_or_the_payload() -> None:
    def nested(ctx: Any, event: Any) -> bool:
        ctx["items"].append(2)
        return False

    def payload(ctx: Any, event: Any) -> bool:
        event.data["x"] = 1
        return False

    for guard in (nested, payload):
        order = _coupon_machine(guard).start()
        with pytest.raises(TypeError, match="read-only"):
            order.send("PAY", x=0)
        assert order.context == {"coupon": False, "items": [1]}
        with pytest.raises(TypeError, match="read-only"):
            order.can("PAY")


def test_guard_reads_the_context_like_a_mapping() -> None:
    seen: list[Any] = []

    def reader(ctx: Any, event: Any) -> bool:
        seen.append(
            (ctx["coupon"], ctx.get("items")[0], list(ctx), len(ctx), "items" in ctx, event["q"])
        )
        return ctx == {"coupon": False, "items": [1]} and ctx["items"] == [1]

    order = _coupon_machine(reader).start()
    assert order.send("PAY", q=3).accepted
    assert seen == [(False, 1, ["coupon", "items"], 2, True, 3)]


def test_refused_event_changes_nothing_even_other_objects() -> None:
    def adds(ctx: Any, event: Any) -> bool:
        ctx["tags"].add("x")
        return False

    config = {"id": "m", "initial": "a", "states": {"a": {"on": {"E": {"guard": "g"}}}}}
    machine = create_machine(config, logic=MachineLogic(guards={"g": adds}))
    inst = machine.start({"tags": set()})
    inst.send("E")
    assert inst.context == {"tags": set()}


# -- the object form of initial, history as initial ------------------------------


def test_initial_object_form_runs_its_actions_between_entries(recorder: Any) -> None:
    rec = recorder("pEntry", "initAct", "aEntry")
    config = {
        "id": "m",
        "initial": "p",
        "states": {
            "p": {
                "entry": "pEntry",
                "initial": {"target": "a", "actions": "initAct"},
                "states": {
                    "a": {"entry": "aEntry", "on": {"GO": "b"}},
                    "b": {"on": {"BACK": "#m.p"}},
                },
            }
        },
    }
    machine = create_machine(config, logic=rec.logic())
    inst = machine.start()
    assert inst.value == {"p": "a"}
    assert [n for n, _ in rec.take()] == ["pEntry", "initAct", "aEntry"]
    inst.send("GO")
    rec.take()
    inst.send("BACK")  # p is exited and entered again by default: its initial actions run
    assert [n for n, _ in rec.take()] == ["pEntry", "initAct", "aEntry"]
    assert [a.type for a in machine.initial_snapshot(now=0).actions] == [
        "pEntry",
        "initAct",
        "aEntry",
    ]


def _initial(name: str, target: str) -> dict[str, Any]:
    return {"target": target, "actions": name}


INDIRECT: dict[str, Any] = {
    "id": "m",
    "initial": "P",
    "states": {
        "P": {
            "type": "parallel",
            "states": {
                "A": {
                    "initial": _initial("initA", "a1"),
                    "states": {
                        "a1": {"initial": _initial("initA1", "x"), "states": {"x": {}}},
                        "a2": {},
                    },
                },
                "B": {
                    "initial": _initial("initB", "b1"),
                    "states": {
                        "b1": {
                            "initial": _initial("initB1", "c"),
                            "states": {"c": {}},
                            "on": {"GO": "#m.P.A.a2"},
                        }
                    },
                },
            },
            "on": {"AWAY": "#m.Z"},
        },
        "Z": {"on": {"BACK": "#m.H.h", "TO": "#m.H.k"}},
        "H": {
            "initial": _initial("initH", "k0"),
            "states": {
                "k0": {},
                "k": {"initial": _initial("initK", "y"), "states": {"y": {}}},
                "h": {"type": "history", "target": "k"},
            },
        },
    },
}


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # B is exited and entered again around a2 (P is the domain): a region
        # filled in around a target does not run its initial actions, the
        # initial state of that region does
        (["GO"], ["initB1"]),
        # a history state's target is not entered by default (its initial
        # state is); the parent of a history state that stands for the
        # parent's initial state would be
        (["AWAY", "BACK"], []),
        # a target is entered by default
        (["AWAY", "TO"], ["initK"]),
    ],
    ids=["sibling-region", "history-target", "target"],
)
def test_initial_actions_run_when_xstate_runs_them(
    recorder: Any, events: list[str], expected: list[str]
) -> None:
    rec = recorder("initA", "initA1", "initB", "initB1", "initH", "initK")
    inst = create_machine(INDIRECT, logic=rec.logic()).start()
    assert [n for n, _ in rec.take()] == ["initA", "initA1", "initB", "initB1"]
    for event in events:
        inst.send(event)
    assert [n for n, _ in rec.take()] == expected


def test_initial_object_form_is_checked() -> None:
    with pytest.raises(InvalidConfigError, match=r"initial\.target") as err:
        create_machine({"initial": {"target": "x"}, "states": {"a": {}}})
    assert "did you mean" in str(err.value) or "one of a" in str(err.value)
    with pytest.raises(InvalidConfigError) as err:
        create_machine({"initial": {"target": "a", "guard": "g"}, "states": {"a": {}}})
    assert err.value.path == "initial.guard"
    with pytest.raises(InvalidConfigError) as err:
        create_machine({"initial": {"actions": "x"}, "states": {"a": {}}})
    assert err.value.path == "initial.target"


def test_initial_may_name_a_history_child() -> None:
    config = {
        "initial": "h",
        "states": {"h": {"type": "history", "target": "a2"}, "a1": {}, "a2": {}},
    }
    assert create_machine(config).start().value == "a2"
    obj = {**config, "initial": {"target": "h"}}
    assert create_machine(obj).start().value == "a2"


# -- eventless transitions after an event that enabled nothing -------------------


def test_targetless_always_runs_once_per_macrostep_even_on_a_refused_event() -> None:
    calls: list[str] = []
    config = {
        "id": "m",
        "initial": "a",
        "states": {"a": {"always": {"actions": "log"}, "on": {"GO": {"actions": "log"}}}},
    }
    logic = MachineLogic(actions={"log": lambda i, c, e, a: calls.append(e.type)})
    inst = create_machine(config, logic=logic).start()
    assert calls == ["xstate.init"]
    receipt = inst.send("NOTHING")
    assert calls == ["xstate.init", "NOTHING"]
    assert not receipt.accepted and len(receipt.transitions) == 1
    inst.send("NOTHING")
    inst.send("GO")
    assert calls == ["xstate.init", "NOTHING", "NOTHING", "GO", "GO"]
    result = create_machine(config, logic=logic).transition(inst.snapshot(), "X", now=0)
    assert [a.type for a in result.actions] == ["log"] and not result.accepted


def test_refused_event_takes_an_enabled_always_transition() -> None:
    config = {
        "id": "m",
        "initial": "a",
        "states": {
            "a": {"always": {"target": "b", "guard": "ready"}},
            "b": {},
        },
    }
    logic = MachineLogic(guards={"ready": lambda c, e: e.type == "POKE"})
    inst = create_machine(config, logic=logic).start()
    receipt = inst.send("POKE")
    assert inst.value == "b" and receipt.changed and not receipt.accepted


# -- history cycles ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"initial": "h", "states": {"h": {"type": "history"}}}, "states.h"),
        (
            {"initial": "a", "states": {"a": {}, "h": {"type": "history", "target": "h"}}},
            "states.h.target",
        ),
        (
            {
                "initial": "a",
                "states": {
                    "a": {},
                    "h1": {"type": "history", "target": "h2"},
                    "h2": {"type": "history", "target": "h1"},
                },
            },
            "states.h1.target",
        ),
        (
            {
                "id": "m",
                "initial": "p",
                "states": {
                    "p": {"initial": "h", "states": {"h": {"type": "history", "target": "#m"}}}
                },
            },
            "states.p.states.h.target",
        ),
    ],
)
def test_history_cycles_are_refused_at_compile_time(config: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidConfigError, match="enters itself") as err:
        create_machine(config)
    assert err.value.path == path


# -- deep data ----------------------------------------------------------------------


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"x": [value]}
    return value


def test_deep_context_is_refused_with_a_clear_error() -> None:
    config = {"initial": "a", "states": {"a": {"on": {"KEEP": {"actions": "keep"}}}}}

    def keep(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        ctx["deep"] = event["payload"]

    machine = create_machine(config, logic=MachineLogic(actions={"keep": keep}))
    with pytest.raises(InvalidConfigError, match="nested more than 100 levels") as err:
        machine.start({"deep": _deep(500)})
    assert err.value.path == "context"
    inst = machine.start()
    inst.send("KEEP", payload=_deep(500))  # the payload itself is never copied
    with pytest.raises(InvalidConfigError, match="nested more than 100 levels"):
        inst.send("KEEP", payload=1)
    with pytest.raises(InvalidConfigError, match="nested more than 100 levels"):
        inst.snapshot()
    assert machine.start({"ok": _deep(40)}).snapshot()["context"] == {"ok": _deep(40)}


def test_deep_snapshot_context_is_corrupt_not_a_recursion_error() -> None:
    machine = create_machine({"initial": "a", "states": {"a": {}}})
    snap = machine.start().snapshot()
    snap["context"] = {"deep": _deep(2000)}
    with pytest.raises(XsmError, match="nested more than 100 levels"):
        machine.transition(snap, "E", now=0)


# -- bounded error messages -----------------------------------------------------------


def test_brief_is_still_importable_from_exceptions() -> None:
    from django_xsm import brief, exceptions

    assert (exceptions.brief, exceptions.brief_error) == (brief.brief, brief.brief_error)


def test_brief_is_bounded_for_any_value() -> None:
    from django_xsm.brief import brief

    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    assert len(brief(deep)) < 100
    assert len(brief(10**5000)) < 100
    assert len(brief("x" * 10**6)) < 100

    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert "Bad" in brief(Bad())


class _Recursive:
    def __repr__(self) -> str:
        return repr(self)  # recurses without end


class _NotText:
    def __repr__(self) -> Any:
        return 42  # repr() refuses it


class _BigInt(int):
    """An int subclass: reprlib dispatches it by name, to the generic case."""


def _deep_tuple(depth: int) -> Any:
    value: Any = ()
    for _ in range(depth):
        value = (value,)
    return value


def _nasty_leaf(name: str) -> Any:
    """Built when drawn, by name: hypothesis prints a strategy's elements,
    and some of these have no printable form."""
    return {
        "huge int": lambda: 10**5000,
        "huge negative int": lambda: -(10**5000),
        "huge int subclass": lambda: _BigInt(10**5000),
        "nan": lambda: float("nan"),
        "inf": lambda: float("inf"),
        "surrogates": lambda: "\ud800" * 3,
        "long text": lambda: "x" * 10**5,
        "long bytes": lambda: b"\x00" * 10**5,
        "bytearray": lambda: bytearray(b"y" * 10**4),
        "recursive repr": _Recursive,
        "repr not text": _NotText,
        "deep tuple": lambda: _deep_tuple(3000),
        "frozenset of a deep tuple": lambda: frozenset({_deep_tuple(50)}),
        "self-containing list": _self_containing,
    }[name]()


def _self_containing() -> Any:
    items: list[Any] = []
    items.append(items)
    return items


_NASTY_NAMES = (
    "huge int", "huge negative int", "huge int subclass", "nan", "inf", "surrogates",
    "long text", "long bytes", "bytearray", "recursive repr", "repr not text", "deep tuple",
    "frozenset of a deep tuple", "self-containing list",
)  # fmt: skip
_NASTY_LEAVES = st.one_of(
    st.integers(), st.text(), st.binary(), st.sampled_from(_NASTY_NAMES).map(_nasty_leaf)
)
#: Values only Python can build: what every error message must print boundedly.
NASTY = st.recursive(
    _NASTY_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), inner, max_size=6),
        inner.map(lambda v: {_deep_tuple(2000): v}),
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=NASTY)
def test_brief_is_total_and_bounded_over_nasty_values(value: Any) -> None:
    """What every error message prints a caller's value with: never an
    exception, never more than 100 characters."""
    from django_xsm.brief import brief

    text = brief(value)
    assert isinstance(text, str) and 0 < len(text) <= 100


# -- arguments of the public faces -------------------------------------------------------


@pytest.mark.parametrize("state_id", [[], {}, None, 1, b"a", _deep_tuple(3000)], ids=_case)
def test_matches_refuses_a_state_id_that_is_not_a_str(state_id: Any) -> None:
    from django_xsm.exceptions import ArgumentTypeError

    inst = create_machine({"id": "m", "initial": "a", "states": {"a": {}}}).start()
    with pytest.raises(ArgumentTypeError) as err:
        inst.matches(state_id)
    assert err.value.path == "state_id" and len(str(err.value)) < 200
    assert inst.matches("a") and inst.matches("m.a") and not inst.matches("zz")


@pytest.mark.parametrize(
    "change",
    [
        {"entry_seq": 10**5000},
        {"entry_seq": 2**53},
        {"entry_seq": -1},
        {"deadlines": [{"state_id": "m.a", "entry": 10**5000, "due_ms": 5, "event_type": "E",
                        "delay": "5"}]},
        {"deadlines": [{"state_id": "m.a", "entry": 1, "due_ms": 2**70, "event_type": "E",
                        "delay": "5"}]},
    ],
    ids=lambda c: next(iter(c)),
)  # fmt: skip
def test_a_snapshot_with_numbers_out_of_range_is_corrupt(change: dict[str, Any]) -> None:
    from django_xsm.exceptions import SnapshotCorruptError

    machine = create_machine(
        {"id": "m", "initial": "a", "states": {"a": {"after": {"5": "b"}}, "b": {}}}
    )
    snap = {**machine.start().snapshot(), **change}
    with pytest.raises(SnapshotCorruptError) as err:
        machine.restore(snap)
    assert len(str(err.value)) < 500


@pytest.mark.parametrize(
    "config",
    [
        {"version": 10**5000},
        {"initial": "a", "states": {"a": {"type": 10**5000}}},
        {"initial": "a", "states": {"a": {"history": _deep(4000)}}},
        {"initial": "a", "states": {"a": {}}, 10**5000: 1},
        {"initial": "a", "states": {"a": {"type": "history", "history": [[[]]] * 10**4}}},
    ],
    ids=_case,
)
def test_config_errors_print_a_bounded_value(config: dict[Any, Any]) -> None:
    with pytest.raises(InvalidConfigError) as err:
        create_machine(config)
    assert len(str(err.value)) < 2000


def test_event_errors_print_a_bounded_value() -> None:
    inst = create_machine({"initial": "a", "states": {"a": {}}}).start()
    for bad in (_deep(4000), 10**5000):
        with pytest.raises(InvalidEventError) as err:
            inst.send({"type": bad})
        assert len(str(err.value)) < 500
    machine = create_machine({"initial": "a", "states": {"a": {}}})
    with pytest.raises(InvalidConfigError) as config_err:
        machine.transition({}, "E", now=_deep(4000))
    assert len(str(config_err.value)) < 500


# -- delays ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "after",
    [
        {float("inf"): "b"},
        {float("nan"): "b"},
        [{"delay": float("inf"), "target": "b"}],
        {"9" * 5000: "b"},
        {10**5000: "b"},
        {2**53: "b"},
        [{"delay": 2**63, "target": "b"}],
        {str(2**63): "b"},
        {"1e400": "b"},
    ],
    ids=_case,
)
def test_out_of_range_delays_are_refused_at_compile_time(after: Any) -> None:
    with pytest.raises(InvalidConfigError, match="Invalid delay") as err:
        create_machine({"initial": "a", "states": {"a": {"after": after}, "b": {}}})
    assert "2**53" in str(err.value)


def test_largest_delay_compiles() -> None:
    machine = create_machine(
        {"initial": "a", "states": {"a": {"after": {2**53 - 1: "b"}}, "b": {}}}
    )
    assert machine.start().deadlines[0].due_ms == 2**53 - 1


@pytest.mark.parametrize(
    "amount", [2**53, 2**63, float("inf"), float("nan"), 10**5000, -1], ids=_case
)
def test_delay_functions_out_of_range_are_refused_at_run_time(amount: Any) -> None:
    config = {"initial": "a", "states": {"a": {"on": {"GO": "b"}}, "b": {"after": {"LATER": "a"}}}}
    machine = create_machine(config, logic=MachineLogic(delays={"LATER": lambda c, e: amount}))
    inst = machine.start()
    with pytest.raises(InvalidConfigError, match="2\\*\\*53") as err:
        inst.send("GO")
    assert err.value.path == "logic.delays.LATER"
    assert inst.value == "a"


def test_named_delay_numbers_are_bounded() -> None:
    with pytest.raises(InvalidConfigError, match="2\\*\\*53"):
        MachineLogic(delays={"LATER": 2**53})


# -- non-string keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"initial": "a", "states": {"a": {"on": {"E": {1: "a"}}}}}, "states.a.on.E[1]"),
        ({"initial": {1: "a"}, "states": {"a": {}}}, "initial[1]"),
        (
            {"initial": "a", "states": {"a": {"entry": {"type": "xstate.raise", 2: 3}}}},
            "states.a.entry[2]",
        ),
    ],
)
def test_non_string_keys_are_clear_config_errors(config: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"must be strings|Unsupported key") as err:
        create_machine(config)
    assert err.value.path == path


@pytest.mark.parametrize("now", [float("inf"), float("nan"), 10**5000], ids=_case)
def test_a_clock_out_of_range_is_a_clear_error(now: Any) -> None:
    config = {"initial": "a", "states": {"a": {"on": {"GO": "b"}}, "b": {"after": {"10": "a"}}}}
    inst = create_machine(config).start(clock=lambda: now)
    with pytest.raises(InvalidConfigError) as err:
        inst.send("GO")
    assert err.value.path == "clock" and inst.value == "a"
