"""Bad input gets one clear InvalidConfigError naming the JSON path."""

from __future__ import annotations

import copy
import sys
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import InvalidConfigError, XsmError


def base() -> dict[str, Any]:
    return {
        "id": "order",
        "initial": "cart",
        "states": {
            "cart": {"on": {"PAY": [{"target": "paid"}], "SHIP": "shipped"}},
            "paid": {},
            "shipped": {"type": "final"},
        },
    }


def error_for(config: Any, **kw: Any) -> InvalidConfigError:
    with pytest.raises(InvalidConfigError) as info:
        create_machine(config, **kw)
    assert isinstance(info.value, XsmError) and isinstance(info.value, ValueError)
    return info.value


def test_valid_base_config_compiles() -> None:
    assert create_machine(base()).start().value == "cart"


@pytest.mark.parametrize("config", [None, [], "order", 3])
def test_non_dict_config(config: Any) -> None:
    err = error_for(config)
    assert "must be a dict" in str(err) and err.path == ""


def test_unknown_target_with_suggestion_and_list_index() -> None:
    config = base()
    config["states"]["cart"]["on"]["PAY"][0]["target"] = "shiped"
    err = error_for(config)
    assert err.path == "states.cart.on.PAY[0].target"
    assert "Unknown target 'shiped'" in str(err)
    assert "did you mean 'shipped'?" in str(err)


def test_unknown_id_target() -> None:
    config = base()
    config["states"]["cart"]["on"]["SHIP"] = "#nowhere"
    err = error_for(config)
    assert err.path == "states.cart.on.SHIP" and "no state has id 'nowhere'" in str(err)


def test_compound_without_initial() -> None:
    config = base()
    del config["initial"]
    err = error_for(config)
    assert err.path == "initial" and "needs 'initial'" in str(err)
    assert "add \"initial\": 'cart'" in str(err)


def test_unknown_initial() -> None:
    config = base()
    config["initial"] = "crt"
    err = error_for(config)
    assert err.path == "initial" and "did you mean 'cart'?" in str(err)


def test_root_target_without_dot() -> None:
    config = base()
    config["on"] = {"RESET": "cart"}
    err = error_for(config)
    assert err.path == "on.RESET"
    assert "'.cart'" in str(err) and "'#order.cart'" in str(err)
    config["on"] = {"RESET": ".cart", "HOME": "#order.cart"}
    assert create_machine(config).start().send("RESET").value == "cart"


def test_duplicate_ids() -> None:
    config = base()
    config["states"]["paid"]["id"] = "x"
    config["states"]["shipped"]["id"] = "x"
    err = error_for(config)
    assert err.path == "states.shipped.id" and "Duplicate state id 'x'" in str(err)


def test_unknown_keys_are_reported_with_suggestions() -> None:
    config = base()
    config["states"]["paid"]["enrty"] = "hello"
    config["versoin"] = "1"
    err = error_for(config)
    assert len(err.problems) == 2
    assert any("states.paid.enrty" in p and "did you mean 'entry'?" in p for p in err.problems)
    assert any("versoin" in p and "did you mean 'version'?" in p for p in err.problems)


def test_root_only_keys_and_unsupported_keys() -> None:
    config = base()
    config["states"]["paid"]["context"] = {}
    config["states"]["cart"]["invoke"] = {"src": "x"}
    err = error_for(config)
    text = " ".join(err.problems)
    assert "'context' is only allowed on the root" in text
    assert "'invoke' is not supported" in text


def test_doc_only_keys_are_allowed() -> None:
    config = base()
    config["description"] = "orders"
    config["states"]["paid"].update(description="paid", meta={"color": "green"}, tags=["money"])
    config["states"]["cart"]["on"]["SHIP"] = {"target": "shipped", "description": "ship it"}
    machine = create_machine(config)
    node = machine.get_state("order.paid")
    assert (node.description, node.meta["color"], node.tags) == ("paid", "green", ("money",))


@pytest.mark.parametrize(
    ("patch", "path", "needle"),
    [
        ({"type": "finale"}, "states.paid.type", "did you mean 'final'?"),
        ({"type": "history", "history": "deeep"}, "states.paid.history", "shallow"),
        ({"history": "deep", "type": "atomic"}, "states.paid.history", "only allowed on history"),
        ({"after": {"-5": "cart"}}, "states.paid.after.-5", "Invalid delay"),
        ({"after": {"1.5": "cart"}}, 'states.paid.after["1.5"]', "Invalid delay"),
        ({"after": "soon"}, "states.paid.after", "'after' must be a dict"),
        ({"after": [{"target": "cart"}]}, "states.paid.after[0]", "need a 'delay'"),
        ({"on": {"a.*.b": "cart"}}, 'states.paid.on["a.*.b"]', "Invalid event descriptor"),
        ({"on": {"": "cart"}}, 'states.paid.on[""]', "use 'always'"),
        ({"on": {"X": 5}}, "states.paid.on.X", "A transition must be"),
        (
            {"on": {"X": {"target": "cart", "internal": True}}},
            "states.paid.on.X.internal",
            "reenter",
        ),
        ({"on": {"X": {"guard": "a", "cond": "b"}}}, "states.paid.on.X.cond", "not both"),
        ({"on": {"X": {"reenter": "yes"}}}, "states.paid.on.X.reenter", "true or false"),
        ({"entry": [["a"]]}, "states.paid.entry[0]", "cannot be nested"),
        ({"entry": {"type": "xstate.assign"}}, "states.paid.entry", "not supported"),
        ({"entry": {"type": "xstate.raise"}}, "states.paid.entry.event", "needs an event"),
        ({"initial": "x"}, "states.paid.initial", "only allowed on compound"),
        ({"type": "parallel"}, "states.paid.states", "needs child states"),
        ({"type": "final", "states": {"a": {}}}, "states.paid.states", "cannot have child states"),
        (
            {"states": {"a.b": {}}, "initial": "a.b"},
            'states.paid.states["a.b"]',
            "Invalid state key",
        ),
        ({"states": {"a": 1}, "initial": "a"}, "states.paid.states.a", "must be a dict"),
        ({"onDone": "cart"}, "states.paid.onDone", "only fires for compound"),
        ({"id": "#x"}, "states.paid.id", "not starting with '#'"),
        ({"tags": [1]}, "states.paid.tags", "list of strings"),
    ],
)
def test_state_shape_errors(patch: dict[str, Any], path: str, needle: str) -> None:
    config = base()
    config["states"]["paid"] = patch
    err = error_for(config)
    assert err.path == path, err.problems
    assert needle in str(err)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            "xstate.emit",
            "states.paid.entry: 'xstate.emit' needs an event "
            '({"type": "xstate.emit", "event": {"type": "E"}})',
        ),
        (
            {"type": "xstate.assign"},
            "states.paid.entry: Built-in action 'xstate.assign' is not supported "
            "(only 'xstate.raise' and 'xstate.emit' are)",
        ),
        (
            5,
            'states.paid.entry: An action must be a name, {"type": name, "params": {...}}, '
            "an xstate.raise or an xstate.emit",
        ),
    ],
)
def test_built_in_action_problems_name_the_registered_actions(entry: Any, problem: str) -> None:
    """The built-in actions a problem lists come from their registry
    (``django_xsm.engine.actions``); the string form names no event."""
    config = base()
    config["states"]["paid"] = {"entry": entry}
    assert error_for(config).problems == (problem,)


def test_conflicting_multiple_targets() -> None:
    config = base()
    config["states"]["cart"]["on"]["PAY"] = {"target": ["paid", "shipped"]}
    err = error_for(config)
    assert "cannot be active together" in str(err)


def test_missing_logic_is_listed_all_at_once() -> None:
    config = base()
    config["states"]["cart"]["entry"] = ["log", {"type": "audit", "params": {"x": 1}}]
    config["states"]["cart"]["on"]["PAY"] = {"target": "paid", "guard": "can_pay"}
    config["states"]["paid"] = {"after": {"TIMEOUT": "cart"}}
    err = error_for(config, logic=MachineLogic(actions={"log": print}))
    assert err.message.startswith("Missing from the logic:")
    assert len(err.problems) == 3
    joined = "\n".join(err.problems)
    for fragment in (
        "states.cart.entry[1]: action 'audit'",
        "states.cart.on.PAY.guard: guard 'can_pay'",
        "states.paid.after.TIMEOUT: delay 'TIMEOUT'",
    ):
        assert fragment in joined


def test_logic_values_are_checked() -> None:
    with pytest.raises(InvalidConfigError, match="callable"):
        MachineLogic(actions={"x": 5})  # type: ignore[dict-item]
    with pytest.raises(InvalidConfigError, match="milliseconds"):
        MachineLogic(delays={"T": -1})
    with pytest.raises(InvalidConfigError, match="logic"):
        create_machine(base(), logic={"actions": {}})  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="version"):
        create_machine(base(), version=2)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="max_microsteps"):
        create_machine(base(), max_microsteps=0)
    with pytest.raises(InvalidConfigError, match="migrations"):
        create_machine(base(), migrations={1: print})  # type: ignore[dict-item]


def nested_states(depth: int) -> dict[str, Any]:
    config: dict[str, Any] = {"id": "deep"}
    node = config
    for _ in range(depth):
        node["initial"] = "s"
        node["states"] = {"s": {}}
        node = node["states"]["s"]
    return config


def test_depth_cap_without_recursion_error() -> None:
    assert create_machine(nested_states(60)).start().state_ids[-1].count(".s") == 60
    limit = sys.getrecursionlimit()
    err = error_for(nested_states(limit * 2))
    assert "nested more than 64 levels" in str(err)


def test_deep_data_is_rejected_without_recursion_error() -> None:
    deep: Any = "leaf"
    for _ in range(sys.getrecursionlimit() * 2):
        deep = {"x": deep}
    config = base()
    config["context"] = {"deep": deep}
    assert "nested more than" in str(error_for(config))
    config = base()
    config["states"]["paid"]["meta"] = copy.copy(deep)
    assert error_for(config).path == "states.paid.meta"


def test_many_problems_are_collected() -> None:
    config = base()
    config["states"]["paid"] = {"type": "bogus", "entry": 3, "colour": "red"}
    err = error_for(config)
    assert len(err.problems) == 3
    assert "[and 2 more problem(s), see .problems]" in str(err)
