"""The geometry the built-in layout works in: boxes, arrows, label
sizes and the small sums on them (kept apart from the layout's
decisions in :mod:`.layout`)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from .graph import Edge

__all__ = [
    "LABEL_H",
    "LW",
    "Layout",
    "Point",
    "Rect",
    "Route",
    "along",
    "along_side",
    "badge_text",
    "label_size",
    "mean",
    "overlap",
    "sides",
]

LW = 6.65  # advance of an 11px monospace character
LABEL_H = 15.0

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
    initials: list[tuple[str, Point, Point]] = field(default_factory=list)
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


def overlap(a: Rect, b: Rect, gap: float = 2.0) -> float:
    dx = min(a.right + gap, b.right + gap) - max(a.x, b.x)
    dy = min(a.bottom + gap, b.bottom + gap) - max(a.y, b.y)
    return dx * dy if dx > 0 and dy > 0 else 0.0


def sides(s: Rect, t: Rect) -> tuple[str, str]:
    """Which sides of the source and the target box an arrow joins."""
    if t.y >= s.bottom - 1:
        return "bottom", "top"
    if t.bottom <= s.y + 1:
        return "top", "bottom"
    return ("right", "left") if t.cx >= s.cx else ("left", "right")


def along_side(other: Rect, side: str) -> float:
    return other.cx if side in ("top", "bottom") else other.cy


def mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default


def along(points: list[Point], t: float) -> Point:
    """The point at fraction ``t`` of the polyline's length."""
    lengths = [math.dist(a, b) for a, b in itertools.pairwise(points)]
    goal = sum(lengths) * t
    for (a, b), length in zip(itertools.pairwise(points), lengths, strict=True):
        if goal <= length and length:
            f = goal / length
            return (a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f)
        goal -= length
    return points[-1]
