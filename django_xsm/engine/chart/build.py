"""Compile a :class:`StateSpec` tree into :class:`StateNode` objects.

Resolves ids (explicit ``id`` or ``<machine id>.<key path>``), ``initial``,
history defaults and transition targets the way XState v5's
``resolveTarget`` does (sibling ``"x"``, child ``".x"``, ``"#id"``), binds
guards, actions and named delays to the logic, and reports every problem
with its JSON path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from django_xsm.brief import brief
from django_xsm.engine.actions import BUILTIN_ACTIONS
from django_xsm.engine.events import after_event_type, done_event_type, is_wildcard
from django_xsm.exceptions import InvalidConfigError

from .compiled import Chart
from .cycles import check_history_cycles
from .logic import MachineLogic
from .model import (
    HISTORY,
    PARALLEL,
    Action,
    Guard,
    StateNode,
    Transition,
)
from .problems import path_join, raise_problems, suggest
from .specs import ActionSpec, GuardSpec, Problems, StateSpec, TransitionSpec

__all__ = ["compile_chart"]


def compile_chart(root_spec: StateSpec, logic: MachineLogic) -> Chart:
    """Compile a parsed state tree, binding its names to ``logic``; raises
    :class:`InvalidConfigError` listing every problem found."""
    problems = Problems()
    specs: list[StateSpec] = []
    stack = [root_spec]
    while stack:  # pre-order, children in key order = document order
        spec = stack.pop()
        specs.append(spec)
        stack.extend(reversed(spec.children))

    machine_id = root_spec.key
    nodes: list[StateNode] = []
    node_of: dict[int, StateNode] = {}
    by_id: dict[str, StateNode] = {}
    key_path: dict[int, str] = {id(root_spec): machine_id}  # "<machine id>.<key path>"
    for order, spec in enumerate(specs):
        parent = node_of[id(spec.parent)] if spec.parent is not None else None
        if spec.parent is not None:
            key_path[id(spec)] = f"{key_path[id(spec.parent)]}.{spec.key}"
        sid = spec.explicit_id or key_path[id(spec)]
        ancestors = (parent, *parent.ancestors) if parent is not None else ()
        node = StateNode(
            id=sid,
            key=spec.key,
            type=spec.type,
            parent=parent,
            order=order,
            bit=1 << order,
            depth=spec.depth,
            ancestors=ancestors,
            anc_mask=sum(a.bit for a in ancestors),
            desc_mask=0,
            initial=spec.initial,
            history=spec.history,
            path=spec.path,
            description=spec.description,
            meta=spec.meta,
            tags=spec.tags,
        )
        if sid in by_id:
            where = path_join(spec.path, "id") if spec.explicit_id else spec.path
            problems.add(
                f"Duplicate state id {brief(sid)} (also used by {by_id[sid].path or 'the root'})",
                where,
                "give one of them another 'id'",
            )
        else:
            by_id[sid] = node
        node_of[id(spec)] = node
        nodes.append(node)

    desc = [0] * len(nodes)
    for node in nodes:
        for anc in node.ancestors:
            desc[anc.order] |= node.bit
    for node in nodes:
        node._init_fields(desc_mask=desc[node.order])

    for spec in specs:
        node = node_of[id(spec)]
        children = tuple(node_of[id(c)] for c in spec.children)
        initial_node = None
        if spec.initial is not None:
            initial_node = next((c for c in children if c.key == spec.initial), None)
            if initial_node is None:
                hint = suggest(spec.initial, [c.key for c in children])
                problems.add(
                    f"Unknown initial state {brief(spec.initial)} of {brief(node.id)}",
                    spec.initial_path,
                    hint or f"one of {brief(', '.join(c.key for c in children))[1:-1]}",
                )
        node._init_fields(
            children=children,
            initial_node=initial_node,
            regions=tuple(c for c in children if c.type != HISTORY),
            history_nodes=tuple(c for c in children if c.type == HISTORY),
        )

    resolver = _Resolver(by_id, problems)
    binder = _Binder(logic)
    for spec in specs:
        node = node_of[id(spec)]
        hist_target = None
        if spec.history_target is not None and node.parent is not None:
            found = [
                resolver.from_node(node.parent, t, path_join(spec.path, "target"))
                for t in spec.history_target
            ]
            if all(f is not None for f in found):
                hist_target = tuple(f for f in found if f is not None)
        transitions = tuple(_transition(node, t, resolver, binder) for t in spec.transitions)
        _finish_node(node, spec, transitions, hist_target, binder)
    check_history_cycles(tuple(nodes), problems)
    raise_problems(problems)
    binder.check()
    return Chart(tuple(nodes), by_id)


def _finish_node(
    node: StateNode,
    spec: StateSpec,
    transitions: tuple[Transition, ...],
    hist_target: tuple[StateNode, ...] | None,
    binder: _Binder,
) -> None:
    on: dict[str, list[Transition]] = {}
    for kind in ("on", "onDone", "after"):  # XState's formatTransitions order
        for t in transitions:
            if t.kind == kind:
                on.setdefault(t.event, []).append(t)
    frozen_on = {d: tuple(ts) for d, ts in on.items()}
    wildcards = tuple((d, ts) for d, ts in frozen_on.items() if is_wildcard(d))
    delays: dict[str, tuple[str, str, Any]] = {}
    for t, tspec in zip(transitions, spec.transitions, strict=True):
        if t.kind == "after" and t.event not in delays and tspec.delay is not None:
            amount: Any = (
                tspec.delay_ms
                if tspec.delay_ms is not None
                else binder.delay(tspec.delay, tspec.path)
            )
            delays[t.event] = (tspec.delay, t.event, amount)
    node._init_fields(
        on=MappingProxyType(frozen_on),
        wildcards=wildcards,
        always=tuple(t for t in transitions if t.kind == "always"),
        transitions=tuple(
            t for k in ("on", "always", "after", "onDone") for t in transitions if t.kind == k
        ),
        delays=tuple(delays.values()),
        after=tuple((d, e) for d, e, _ in delays.values()),
        entry=tuple(binder.action(a) for a in spec.entry),
        initial_actions=tuple(binder.action(a) for a in spec.initial_actions),
        exit=tuple(binder.action(a) for a in spec.exit),
        history_target=hist_target,
    )


def _transition(
    node: StateNode, spec: TransitionSpec, resolver: _Resolver, binder: _Binder
) -> Transition:
    if spec.kind == "after":
        event = after_event_type(spec.delay or "", node.id)
    elif spec.kind == "onDone":
        event = done_event_type(node.id)
    else:
        event = spec.event
    targets: tuple[StateNode, ...] | None = None
    if spec.targets:
        found = [resolver.target(node, t, spec.target_path) for t in spec.targets]
        if all(f is not None for f in found):
            targets = tuple(f for f in found if f is not None)
            resolver.check_compatible(targets, spec.target_path)
    return Transition(
        source=node,
        targets=targets,
        event=event,
        kind=spec.kind,
        guard=binder.guard(spec.guard) if spec.guard is not None else None,
        actions=tuple(binder.action(a) for a in spec.actions),
        reenter=spec.reenter,
        delay=spec.delay,
        path=spec.path,
        source_id=node.id,
        target_ids=tuple(t.id for t in targets) if targets else (),
    )


class _Resolver:
    def __init__(self, by_id: dict[str, StateNode], problems: Problems) -> None:
        self.by_id = by_id
        self.problems = problems

    def target(self, source: StateNode, target: str, path: str) -> StateNode | None:
        if target.startswith("#"):
            return self.by_ref(target, path)
        if target.startswith("."):
            return self.walk(source, target[1:], target, path)
        if source.parent is None:
            self.problems.add(
                f"Target {brief(target)} is not valid from the root state",
                path,
                f"root transitions target children with a dot ({brief('.' + target)}) "
                f"or an id ({brief(f'#{source.id}.{target}')})",
            )
            return None
        return self.walk(source.parent, target, target, path)

    def from_node(self, base: StateNode, target: str, path: str) -> StateNode | None:
        if target.startswith("#"):
            return self.by_ref(target, path)
        return self.walk(base, target.lstrip("."), target, path)

    def by_ref(self, ref: str, path: str) -> StateNode | None:
        name = ref[1:]
        node = self.by_id.get(name)
        if node is not None:
            return node
        # "#id.child.grandchild": the longest known id prefix, then keys
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            base = self.by_id.get(".".join(parts[:cut]))
            if base is not None:
                return self.walk(base, ".".join(parts[cut:]), ref, path)
        hint = suggest(name, self.by_id)
        self.problems.add(
            f"Unknown target {brief(ref)}: no state has id {brief(name)}",
            path,
            hint.replace("'", "'#", 1)
            if hint
            else "ids are '<machine id>.<key path>' or an explicit 'id'",
        )
        return None

    def walk(self, base: StateNode, rel: str, written: str, path: str) -> StateNode | None:
        node = base
        for key in rel.split("."):
            if not key:
                continue
            child = next((c for c in node.children if c.key == key), None)
            if child is None:
                keys = [c.key for c in node.children]
                hint = suggest(key, keys) or (
                    f"children of {brief(node.id)}: {brief(', '.join(keys))[1:-1]}"
                    if keys
                    else f"{brief(node.id)} has no child states"
                )
                self.problems.add(f"Unknown target {brief(written)}", path, hint)
                return None
            node = child
        return node

    def check_compatible(self, targets: tuple[StateNode, ...], path: str) -> None:
        for i, a in enumerate(targets):
            for b in targets[i + 1 :]:
                if a is b or a.anc_mask & b.bit or b.anc_mask & a.bit:
                    continue
                lca = next(x for x in a.ancestors if b.anc_mask & x.bit)
                if lca.type != PARALLEL:
                    self.problems.add(
                        f"Targets {brief(a.id)} and {brief(b.id)} cannot be active together",
                        path,
                        "several targets must lie in different regions of a parallel state",
                    )


class _Binder:
    """Binds names to the logic and collects every missing one."""

    def __init__(self, logic: MachineLogic) -> None:
        self.actions = logic.actions
        self.guards = logic.guards
        self.delays = logic.delays
        self.missing = Problems()

    def action(self, spec: ActionSpec) -> Action:
        builtin = BUILTIN_ACTIONS.get(spec.type)
        if builtin is not None:
            return builtin.compile(spec)
        params = MappingProxyType(spec.params) if spec.params is not None else None
        fn = self.actions.get(spec.type)
        if fn is None:
            self._missing("action", spec.type, spec.path, self.actions)
        return Action(spec.type, params, spec.path, fn=fn)

    def guard(self, spec: GuardSpec) -> Guard:
        fn = self.guards.get(spec.type)
        if fn is None:
            self._missing("guard", spec.type, spec.path, self.guards)
            return Guard(spec.type, None, spec.path, _never, False)
        params = MappingProxyType(spec.params) if spec.params is not None else None
        return Guard(spec.type, params, spec.path, fn, _takes_params(fn))

    def delay(self, name: str, path: str) -> Any:
        if name not in self.delays:
            self._missing("delay", name, path, self.delays)
            return 0
        return self.delays[name]

    def _missing(self, what: str, name: str, path: str, known: Mapping[str, Any]) -> None:
        hint = suggest(name, known)
        self.missing.add(
            f"{what} {brief(name)} is not in the logic",
            path,
            hint or f"add it to MachineLogic({what}s=...)",
        )

    def check(self) -> None:
        if not self.missing:
            return
        names = ", ".join(m.split(" is ")[0] for m, _, _ in self.missing)
        raise InvalidConfigError(
            f"Missing from the logic: {names}",
            path=self.missing[0][1],
            hint="add them to MachineLogic(actions=..., guards=..., delays=...)",
            problems=self.missing.listing(),
        )


def _never(*_args: Any) -> bool:
    return False


def _takes_params(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` accepts a third positional argument (guard params)."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        if code.co_flags & 0x04:  # *args
            return True
        count: int = code.co_argcount
        if getattr(fn, "__self__", None) is not None:  # bound method
            count -= 1
        return count >= 3
    import inspect  # only for partials, builtins and callable objects

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return any(p.kind == p.VAR_POSITIONAL for p in params) or len(positional) >= 3
