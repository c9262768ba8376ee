"""Fuzzing the boundary (hypothesis): random configs fed to
``create_machine`` and random events fed to ``send``/``can``/``transition``.

The rule: either it works, or it raises an :class:`XsmError` that is also a
``ValueError`` or ``TypeError``; never another exception type
(``RecursionError``, ``OverflowError``, a bare ``TypeError`` from deep
inside).
"""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import XsmError

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**53, 2**63, -(2**63), -1, 0, "<huge>", "<-huge>"]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["\udc80", "\ud800x", "a.*", "*", "#x", ".a", "xstate.raise", "1e400"]),
)
NAMES = st.sampled_from(
    ["a", "b", "c", "h", "p", "E", "GO", "log", "ok", "T", "#m.a", ".a", "a.b", "1000"]
)
KEYS = st.one_of(
    NAMES,
    st.sampled_from(
        [
            "initial",
            "states",
            "on",
            "always",
            "after",
            "entry",
            "exit",
            "type",
            "target",
            "actions",
            "guard",
            "cond",
            "reenter",
            "history",
            "id",
            "onDone",
            "delay",
            "params",
            "event",
            "description",
            "meta",
            "tags",
            "context",
            "version",
        ]
    ),
    st.integers(),
    st.sampled_from(["<huge>", float("nan"), float("inf"), (1, 2), None, True]),
    st.text(max_size=6),
)
DEEP = st.sampled_from(["<deep500>", "<deep1500>", "<deep5000>"])
# hypothesis prints examples with repr(): the huge and deep values are
# markers, expanded by _expand() inside the test
MARKERS: dict[str, Any] = {
    "<huge>": 10**5000,
    "<-huge>": -(10**5000),
    "<deep500>": _nested(500),
    "<deep1500>": _nested(1500),
    "<deep5000>": _nested(5000),
}


def _expand(value: Any) -> Any:
    if isinstance(value, str):
        return MARKERS.get(value, value)
    if isinstance(value, dict):
        return {_expand(k): _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    return value


def _json_ish(max_leaves: int) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.one_of(SCALARS, NAMES, DEEP),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(KEYS, inner, max_size=5),
        ),
        max_leaves=max_leaves,
    )


STATE_TYPES = st.sampled_from(["atomic", "compound", "parallel", "final", "history", "bad"])


@st.composite
def charts(draw: st.DrawFn, depth: int = 0) -> dict[Any, Any]:
    """Mostly plausible state configs, with random junk mixed in."""
    state: dict[Any, Any] = {}
    if depth < 3 and draw(st.booleans()):
        children = draw(
            st.lists(st.sampled_from(["a", "b", "c", "h", "p"]), max_size=3, unique=True)
        )
        state["states"] = {k: draw(charts(depth + 1)) for k in children}
        if children:
            state["initial"] = draw(
                st.one_of(
                    st.sampled_from(children),
                    st.fixed_dictionaries({"target": st.sampled_from(children)}),
                    _json_ish(3),
                )
            )
    if draw(st.booleans()):
        state["type"] = draw(st.one_of(STATE_TYPES, SCALARS))
    for key in draw(st.lists(KEYS, max_size=3)):
        state[key] = draw(
            st.one_of(
                _json_ish(6),
                NAMES,
                st.dictionaries(NAMES, st.one_of(NAMES, _json_ish(4)), max_size=3),
            )
        )
    return state


def _logic() -> MachineLogic:
    return MachineLogic(
        actions={"log": lambda i, c, e, a: None, "a": lambda i, c, e, a: None},
        guards={"ok": lambda c, e: True, "E": lambda c, e: False},
        delays={"T": lambda c, e: e.get("ms", 10), "a": 5},
    )


def _allowed(exc: BaseException) -> bool:
    return isinstance(exc, XsmError) and isinstance(exc, ValueError | TypeError)


@FUZZ
@given(config=st.one_of(charts(), _json_ish(10)))
def test_create_machine_works_or_raises_a_clear_error(config: Any) -> None:
    config = _expand(config)
    try:
        machine = create_machine(config, logic=_logic())
        inst = machine.start()
        inst.snapshot()
    except Exception as exc:
        assert _allowed(exc), f"{type(exc).__name__}: {str(exc)[:300]}"


EVENT_CHART = {
    "id": "m",
    "initial": "a",
    "context": {"n": 0},
    "states": {
        "a": {
            "always": {"actions": "log", "guard": "ok"},
            "on": {
                "GO": {"target": "b", "guard": "ok"},
                "*": {"actions": "keep"},
            },
        },
        "b": {"after": {"T": "a"}, "on": {"GO": "a"}},
    },
}


def keep(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["last"] = event.data.get("p")


def delay(ctx: Any, event: Any) -> Any:
    return event.get("ms", 10)


EVENT_MACHINE = create_machine(
    EVENT_CHART,
    logic=MachineLogic(
        actions={"log": lambda i, c, e, a: None, "keep": keep},
        guards={"ok": lambda c, e: bool(e.get("p", True))},
        delays={"T": delay},
    ),
)

EVENT_TYPES = st.one_of(
    st.sampled_from(["GO", "X", "xstate.after.T.m.b", "xstate.init", "", "\udc80", "a.b"]),
    st.text(max_size=6),
    SCALARS,
    DEEP,
)
PAYLOADS = st.dictionaries(
    st.sampled_from(["p", "ms", "q", "type"]) | st.text(max_size=4), _json_ish(6), max_size=4
)


@FUZZ
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["send", "can", "transition", "mapping"]), EVENT_TYPES, PAYLOADS),
        min_size=1,
        max_size=6,
    )
)
def test_events_work_or_raise_a_clear_error(steps: list[tuple[str, Any, dict[str, Any]]]) -> None:
    inst = EVENT_MACHINE.start()
    for how, raw_type, raw_payload in steps:
        etype, payload = _expand(raw_type), _expand(raw_payload)
        try:
            if how == "send":
                inst.send(etype, **payload)
            elif how == "can":
                inst.can(etype, **payload)
            elif how == "mapping":
                inst.send({**payload, "type": etype})
            else:
                EVENT_MACHINE.transition(inst.snapshot(), {**payload, "type": etype}, now=0)
        except Exception as exc:
            assert _allowed(exc), f"{type(exc).__name__}: {str(exc)[:300]}"
    assert sys.getrecursionlimit() >= 1000
