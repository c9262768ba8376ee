"""The geometry the built-in layout works in: boxes, arrows, label
sizes and the small sums on them (kept apart from the layout's
decisions in :mod:`.layout`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .graph import Edge

__all__ = [
    "HEAD",
    "LABEL_H",
    "LW",
    "PAD",
    "PADX",
    "Layout",
    "Point",
    "Rect",
    "Route",
    "badge_text",
    "label_size",
    "spread",
]

LW = 6.65  # advance of an 11px monospace character
LABEL_H = 15.0
HEAD = 26.0  # a container's title strip
PAD = 14.0  # between a container's border and what it holds
PADX = 12.0  # before a state's name

Point = tuple[float, float]


@dataclass(slots=True)
class Rect:
    x: float
    y: float
    w: float
    h: float

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    def overlaps(self, other: Rect, gap: float = 0.0) -> bool:
        return not (
            self.right + gap <= other.x
            or other.right + gap <= self.x
            or self.bottom + gap <= other.y
            or other.bottom + gap <= self.y
        )


@dataclass(slots=True)
class Route:
    """An arrow: its polyline (the head at the last point) and its label's
    box (None without a label), badge included."""

    edge: Edge
    points: list[Point]
    label: Rect | None = None


@dataclass(slots=True)
class Layout:
    width: float
    height: float
    boxes: dict[str, Rect]
    initials: list[tuple[str, list[Point]]] = field(default_factory=list)
    separators: list[tuple[str, float, float, float]] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)


def badge_text(steps: tuple[int, ...]) -> str:
    """``1, 4, 7 …``: the first three log numbers of a taken arrow."""
    if not steps:
        return ""
    shown = ", ".join(str(s) for s in steps[:3])
    return f"{shown} …" if len(steps) > 3 else shown


def label_size(edge: Edge) -> tuple[float, float]:
    """The width of an arrow's label with its badge, and of the badge."""
    badge = badge_text(edge.steps)
    badge_w = len(badge) * 6.0 + 10 if badge else 0.0
    text_w = len(edge.label) * LW + 8 if edge.label else 0.0
    return text_w + badge_w + (3 if badge and text_w else 0), badge_w


def spread(box: Rect, side: str, f: float, *, circle: bool = False) -> Point:
    """The point at fraction ``f`` of the ``top`` or ``bottom`` side of a
    box (within its middle 70%), or of a circle's outline around it."""
    if circle:
        a = (-math.pi / 2 if side == "top" else math.pi / 2) + (f - 0.5) * 1.2 * (
            1 if side == "bottom" else -1
        )
        return (box.cx + math.cos(a) * box.w / 2, box.cy + math.sin(a) * box.h / 2)
    return (box.x + box.w * (0.15 + 0.7 * f), box.y if side == "top" else box.bottom)
