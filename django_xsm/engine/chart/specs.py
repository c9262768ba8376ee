"""Normalised definitions produced by :mod:`.config` and compiled by :mod:`.build`.

Plain slotted records; every one carries the JSON path it came from so
errors found later (unknown targets, missing logic) can name it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ActionSpec", "GuardSpec", "Problems", "StateSpec", "TransitionSpec"]


class Problems(list[tuple[str, str, str]]):
    """Collected config problems: ``(message, JSON path, hint)``."""

    def add(self, message: str, path: str, hint: str = "") -> None:
        self.append((message, path, hint))

    def listing(self) -> tuple[str, ...]:
        """``"path: message (hint)"`` per problem (without a path: the message)."""
        return tuple((f"{p}: {m}" if p else m) + (f" ({h})" if h else "") for m, p, h in self)


class GuardSpec:
    __slots__ = ("params", "path", "type")

    def __init__(self, type: str, params: dict[str, Any] | None, path: str) -> None:
        self.type = type
        self.params = params
        self.path = path


class ActionSpec:
    """A named action, or ``xstate.raise`` / ``xstate.emit`` (``type``) with
    the event it raises or emits in ``builtin_event``."""

    __slots__ = ("builtin_event", "params", "path", "type")

    def __init__(
        self,
        type: str,
        params: dict[str, Any] | None,
        path: str,
        builtin_event: dict[str, Any] | None = None,
    ) -> None:
        self.type = type
        self.params = params
        self.path = path
        self.builtin_event = builtin_event


class TransitionSpec:
    """One transition. ``kind`` is ``on``/``always``/``after``/``onDone``;
    ``event`` the descriptor (``""`` for ``always``, the ``xstate.after`` /
    ``xstate.done.state`` type for the others, filled in by the model);
    ``targets`` is ``None`` for a targetless transition."""

    __slots__ = (
        "actions",
        "delay",
        "delay_ms",
        "event",
        "guard",
        "kind",
        "path",
        "reenter",
        "target_path",
        "targets",
    )

    def __init__(
        self,
        kind: str,
        event: str,
        targets: tuple[str, ...] | None,
        *,
        actions: list[ActionSpec],
        guard: GuardSpec | None,
        reenter: bool,
        path: str,
        delay: str | None = None,
        delay_ms: int | None = None,
    ) -> None:
        self.kind = kind
        self.event = event
        self.targets = targets
        self.actions = actions
        self.guard = guard
        self.reenter = reenter
        self.path = path
        self.delay = delay
        self.delay_ms = delay_ms
        self.target_path = path


class StateSpec:
    __slots__ = (
        "children",
        "depth",
        "description",
        "entry",
        "exit",
        "explicit_id",
        "history",
        "history_target",
        "initial",
        "initial_actions",
        "initial_path",
        "key",
        "meta",
        "parent",
        "path",
        "tags",
        "transitions",
        "type",
    )

    def __init__(self, key: str, path: str, parent: StateSpec | None, depth: int) -> None:
        self.key = key
        self.path = path
        self.parent = parent
        self.depth = depth
        self.type = "atomic"
        self.initial: str | None = None  # the child key, whichever form was written
        self.initial_path = ""  # JSON path of that key
        self.initial_actions: list[ActionSpec] = []  # of the object form
        self.history: str | None = None
        self.history_target: tuple[str, ...] | None = None
        self.explicit_id: str | None = None
        self.transitions: list[TransitionSpec] = []
        self.entry: list[ActionSpec] = []
        self.exit: list[ActionSpec] = []
        self.children: list[StateSpec] = []
        self.description: str | None = None
        self.meta: Any = None
        self.tags: tuple[str, ...] = ()
