"""Configurations and state values.

A configuration (the set of active states, SCXML's word) is an int mask of
node bits; :class:`Configuration` objects are interned per machine and cache
everything derived from the mask (document-ordered nodes, atomic states,
state ids, the XState state value, selected transitions per event). State
values follow XState v5's ``getStateValue`` (docs/engine.md, "State values").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.engine.chart.model import ATOMIC, COMPOUND, FINAL, PARALLEL, StateNode

__all__ = [
    "Configuration",
    "ConfigurationCache",
    "copy_value",
    "mask_from_value",
]

_CACHE_LIMIT = 4096  # interned configurations per machine
_SELECTION_LIMIT = 512  # cached selections per configuration


class Configuration:
    """The active states. ``nodes``/``state_ids`` are in document order
    (root first); ``atomic`` holds the active atomic and final states."""

    __slots__ = (
        "atomic",
        "has_always",
        "mask",
        "nodes",
        "plans",
        "selection",
        "state_ids",
        "value_template",
    )

    def __init__(self, mask: int, all_nodes: tuple[StateNode, ...]) -> None:
        self.mask = mask
        self.nodes = tuple(n for n in all_nodes if mask & n.bit)
        self.atomic = tuple(n for n in self.nodes if n.type in (ATOMIC, FINAL))
        self.state_ids = tuple(n.id for n in self.nodes)
        self.has_always = any(n.always for n in self.nodes)
        self.value_template: Any = _value_of(self.nodes[0], mask) if self.nodes else {}
        # event type -> cached selection / micro plan (see runner.py)
        self.selection: dict[str, Any] = {}
        self.plans: dict[Any, Any] = {}

    def value(self) -> Any:
        """A fresh copy of the state value (callers may mutate it)."""
        template = self.value_template
        return template if type(template) is str else copy_value(template)

    def cache_selection(self, event_type: str, entry: Any) -> None:
        if len(self.selection) < _SELECTION_LIMIT:
            self.selection[event_type] = entry

    def __repr__(self) -> str:
        return f"Configuration({list(self.state_ids)!r})"


class ConfigurationCache:
    """Interns :class:`Configuration` objects by mask (bounded)."""

    __slots__ = ("_by_mask", "nodes")

    def __init__(self, nodes: tuple[StateNode, ...]) -> None:
        self.nodes = nodes
        self._by_mask: dict[int, Configuration] = {}

    def get(self, mask: int) -> Configuration:
        cfg = self._by_mask.get(mask)
        if cfg is None:
            cfg = Configuration(mask, self.nodes)
            if len(self._by_mask) < _CACHE_LIMIT:
                self._by_mask[mask] = cfg
        return cfg


def copy_value(value: Any) -> Any:
    if type(value) is dict:
        return {k: copy_value(v) for k, v in value.items()}
    return value


def _value_of(node: StateNode, mask: int) -> Any:
    if node.type == COMPOUND:
        for child in node.regions:
            if mask & child.bit:
                if child.type in (ATOMIC, FINAL):
                    return child.key
                return {child.key: _value_of(child, mask)}
        return {}
    if node.type == PARALLEL:
        return {c.key: _value_of(c, mask) for c in node.regions if mask & c.bit}
    return {}


def mask_from_value(root: StateNode, value: Any) -> int:
    """Configuration mask for an XState state value; ``ValueError`` when the
    value does not describe a complete, valid configuration of this chart.

    Accepts the canonical form and also ``{"a": {}}`` for an atomic child.
    Recursion is bounded by the chart's depth, not by the input.
    """
    return root.bit | _mask_below(root, value, root.id)


def _mask_below(node: StateNode, value: Any, where: str) -> int:
    if node.type == COMPOUND:
        if isinstance(value, str):
            key, sub = value, None
        elif isinstance(value, Mapping) and len(value) == 1:
            key, sub = next(iter(value.items()))
        else:
            raise ValueError(f"{where}: expected one child key of {node.id!r}, got {brief(value)}")
        child = _child(node, key, where)
        if child.type in (ATOMIC, FINAL):
            if sub not in (None, {}):
                raise ValueError(
                    f"{where}.{key}: {brief(child.id)} is {child.type}, it has no children"
                )
            return child.bit
        if sub is None:
            raise ValueError(
                f"{where}.{key}: {brief(child.id)} is {child.type}; its active children are missing"
            )
        return child.bit | _mask_below(child, sub, f"{where}.{key}")
    if node.type == PARALLEL:
        if not isinstance(value, Mapping):
            raise ValueError(
                f"{where}: expected a dict of all regions of {node.id!r}, got {brief(value)}"
            )
        expected = {c.key for c in node.regions}
        if set(value) != expected:
            raise ValueError(
                f"{where}: regions of {brief(node.id)} are {brief(sorted(expected))}, "
                f"got {brief(list(value))}"
            )
        mask = 0
        for region in node.regions:
            sub = value[region.key]
            mask |= region.bit
            if region.type in (ATOMIC, FINAL):
                if sub != {}:
                    raise ValueError(f"{where}.{region.key}: an atomic region has the value {{}}")
            else:
                mask |= _mask_below(region, sub, f"{where}.{region.key}")
        return mask
    if value != {}:
        raise ValueError(f"{where}: {brief(node.id)} is {node.type}, expected {{}}")
    return 0


def _child(node: StateNode, key: object, where: str) -> StateNode:
    for c in node.regions:
        if c.key == key:
            return c
    raise ValueError(f"{where}: {brief(node.id)} has no child state {brief(key)}")
