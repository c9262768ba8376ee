"""One container's inside in the built-in layout: its rows, the order
along each row and where everything stands.

A container is drawn as a stack of rows, Sugiyama's layered drawing: the
top border row (the initial dot, and the arrows crossing the top
border), one row per rank of children (breadth-first distance from the
initial child along the arrows between them; a parallel state's regions
stand in one row, in chart order), the history markers' row, the bottom
border row. A chain (:mod:`.chains`) takes a *slot* in every row between
its ends: a line running straight through the row, or once a label row
below its start (above it for a chain going up; a chain within a row
turns in the label row below), where its label stands beside the line.
Label rows exist only where a label or a turn needs one.

Slots of a row never overlap, and a chain changes course only in the
free gap between two rows, so no arrow crosses a box it does not join
and no label covers a box (or another label, or an arrow). The order of
each row is improved by barycenter sweeps, keeping the order with the
fewest crossings; positions pull every slot towards its neighbours along
the chains (a weighted least-squares fit keeping the order and the gaps),
which straightens long arrows.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .chains import BOTTOM, DOT, TOP, Chain, End
from .graph import Graph
from .shapes import HEAD, LABEL_H, PAD, Point, Rect, spread

__all__ = ["Kid", "Stack", "levels"]

GAP_BOX, GAP_REGION, GAP_LINE = 40.0, 22.0, 14.0
DOT_R = 5.0
LABEL_DX = 5.0  # from a label's line to its text box
SWEEPS, FITS = 8, 10
LANE_MIN = 360.0  # a label row may be as wide as the widest row of boxes, or this


def levels(graph: Graph, container: str) -> dict[str, int]:
    """The row of each child of ``container``: 1 + its rank (a parallel
    state's regions all 1), history markers one row below the last rank.
    Arrows from or to a descendant count for the child holding it."""
    node = graph.nodes[container]
    kids = [graph.nodes[c] for c in node.children]
    ids = [k.id for k in kids if k.kind != "history"]
    rank: dict[str, int] = {}
    if node.kind == "parallel":
        rank = dict.fromkeys(ids, 0)
    else:
        succ: dict[str, list[str]] = {i: [] for i in ids}
        for e in graph.edges:
            if e.source == e.target or e.kind == "history":
                continue
            a = graph.child_towards(container, e.source)
            b = graph.child_towards(container, e.target)
            if a in succ and b in succ and a != b:
                succ[a].append(b)
        seeds = [node.initial] if node.initial in succ else []
        for seed in [*seeds, *ids]:
            if seed is None or seed in rank:
                continue
            rank[seed] = 0
            queue = deque([seed])
            while queue:
                current = queue.popleft()
                for nxt in succ[current]:
                    if nxt not in rank:
                        rank[nxt] = rank[current] + 1
                        queue.append(nxt)
    last = max(rank.values(), default=-1) + 1
    found = {i: r + 1 for i, r in rank.items()}
    found.update({k.id: last + 1 for k in kids if k.kind == "history"})
    return found


@dataclass(frozen=True, slots=True)
class Kid:
    """A child as its container's rows see it: ``w`` is its footprint
    (its box and the loops on its right), ``box_w`` its box; ``ports``
    the x (from its left) where chains cross its border, for a container."""

    id: str
    w: float
    box_w: float
    h: float
    level: int
    circle: bool = False
    ports: Mapping[str, float] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class Slot:
    kind: str  # box, border, dot, title, via, label
    w: float
    key: str = ""  # the chain of a border, dot, via or label slot
    kid: Kid | None = None
    x: float = 0.0
    fixed: bool = False
    links: list[tuple[Slot, str, int]] = field(default_factory=list)  # (slot, chain, +1 below)
    spots: dict[str, tuple[str, float]] = field(default_factory=dict)  # chain -> side, fraction
    flip: bool = False  # a label left of its line

    def anchor(self, key: str) -> float:
        """Where chain ``key`` joins this slot, from its left."""
        if self.kid is None:
            return DOT_R if self.kind == "dot" else self.w if self.flip else 0.0
        return self.port(key, Rect(0, 0, self.kid.box_w, self.kid.h))[0]

    def port(self, key: str, box: Rect) -> Point:
        """Where chain ``key`` joins this child drawn at ``box``: where it
        crosses a container's border, else spread along the side of a
        leaf (in the order of where the chains go, so they do not cross)."""
        kid = self.kid
        assert kid is not None
        side, f = self.spots.get(key, (TOP, 0.5))
        if key in kid.ports:
            return (box.x + kid.ports[key], box.bottom if side == BOTTOM else box.y)
        return spread(box, side, f, circle=kid.circle)


@dataclass(eq=False, slots=True)
class Row:
    level: float
    slots: list[Slot] = field(default_factory=list)
    y: float = 0.0
    h: float = 0.0

    @property
    def is_label(self) -> bool:
        return self.level != int(self.level)


class Stack:
    """The rows of one container, in its own coordinates (the top left
    of its box is 0, 0): where each child stands (:attr:`at`), its
    size, and where each chain crosses its border (:attr:`ports`)."""

    def __init__(
        self,
        *,
        parallel: bool,
        kids: Sequence[Kid],
        chains: Sequence[Chain],
        borders: Sequence[tuple[str, str]],
        title_w: float,
        head_w: float,
    ) -> None:
        self.parallel = parallel
        self.chains = list(chains)
        states = [k.level for k in kids if not k.circle]
        self.bottom_level = max(states, default=0) + 2
        self.rows: dict[float, Row] = {}
        self.box_of: dict[str, Slot] = {}
        self.border_of: dict[str, Slot] = {}
        self.paths: dict[str, list[Slot]] = {}
        self.row_of: dict[Slot, Row] = {}
        for kid in kids:
            self.add(kid.level, Slot("box", kid.w, kid=kid, fixed=parallel), kid.id)
        if any(side == TOP for _, side in borders):  # keeps arrows off the title
            self.add(0, Slot("title", title_w, fixed=True))
        for key, side in dict.fromkeys(borders):
            slot = Slot("dot" if side == DOT else "border", 2 * DOT_R if side == DOT else 0.0, key)
            self.border_of[key] = slot
            self.add(0 if side in (TOP, DOT) else self.bottom_level, slot)
        self.route()
        self.order()
        self.spread()
        self.fit()
        self.stack_up(head_w)

    # --- building -------------------------------------------------------------------

    def add(self, level: float, slot: Slot, kid: str | None = None) -> None:
        row = self.rows.setdefault(level, Row(level))
        row.slots.append(slot)
        self.row_of[slot] = row
        if kid is not None:
            self.box_of[kid] = slot

    def level(self, end: End) -> float:
        if end.node is not None:
            kid = self.box_of[end.node].kid
            assert kid is not None
            return kid.level
        return 0 if end.side in (TOP, DOT) else self.bottom_level

    def slot(self, end: End, key: str) -> Slot:
        return self.box_of[end.node] if end.node is not None else self.border_of[key]

    def lanes(self) -> dict[str, float]:
        """The label row of each chain that turns or carries a label: in
        the gap its first step crosses (a turn: the gap below its row).
        A gap whose labels would make a row wider than the widest row of
        boxes gets more label rows (lanes), filled evenly; a turn takes
        the first, next to the row it turns back to."""
        limit = max(
            [LANE_MIN]
            + [sum(s.w for s in r.slots) + GAP_BOX * (len(r.slots) - 1) for r in self.rows.values()]
        )
        gaps: dict[int, list[Chain]] = {}
        for c in self.chains:
            a, b = self.level(c.start), self.level(c.end)
            if a == b or c.label:
                gaps.setdefault(int(a if b >= a else a - 1), []).append(c)
        found: dict[str, float] = {}
        for gap, users in gaps.items():
            total = sum(c.label + LABEL_DX + GAP_LINE for c in users)
            k = max(1, math.ceil(total / limit))
            levels = [gap + (j + 1) / (k + 1) for j in range(k)]
            load = [0.0] * k
            turns = [c for c in users if self.level(c.start) == self.level(c.end)]
            for c in turns + [c for c in users if c not in turns]:
                lane = 0 if c in turns else load.index(min(load))
                load[lane] += c.label + LABEL_DX + GAP_LINE
                found[c.key] = levels[lane]
            for level in levels:
                self.rows.setdefault(level, Row(level))
        return found

    def route(self) -> None:
        """A slot for each chain in every row between its ends."""
        label_at = self.lanes()  # label rows first: they are rows to pass too
        for c in self.chains:
            a, b = self.level(c.start), self.level(c.end)
            path = [self.slot(c.start, c.key)]
            for level in sorted(self.rows, reverse=b < a):
                turn = a == b and level == label_at[c.key]
                if not turn and ((level - a) * (b - a) <= 0 or (b - level) * (b - a) <= 0):
                    continue
                labelled = bool(c.label) and level == label_at.get(c.key)
                via = Slot("label" if labelled else "via", c.label + LABEL_DX if labelled else 0.0)
                via.key = c.key
                self.add(level, via)
                path.append(via)
            path.append(self.slot(c.end, c.key))
            self.paths[c.key] = path
            for p, q in itertools.pairwise(path):
                down = 1 if self.row_of[q].level > self.row_of[p].level else -1
                p.links.append((q, c.key, down))
                q.links.append((p, c.key, -down))

    def ordered_rows(self) -> list[Row]:
        return [self.rows[k] for k in sorted(self.rows)]

    # --- order along the rows ---------------------------------------------------------

    def crossings(self, rows: list[Row]) -> int:
        total = 0
        for upper in rows:
            pos = {s: i for i, s in enumerate(upper.slots)}
            links = []
            for s in upper.slots:
                for other, _, down in s.links:
                    if down > 0:
                        links.append((pos[s], other))
            for (a1, s1), (a2, s2) in itertools.combinations(links, 2):
                r1, r2 = self.row_of[s1], self.row_of[s2]
                if r1 is not r2:
                    continue
                b1, b2 = r1.slots.index(s1), r2.slots.index(s2)
                total += (a1 - a2) * (b1 - b2) < 0
        return total

    def order(self) -> None:
        """Barycenter sweeps down and up; the order with the fewest
        crossings wins (the first of equals: deterministic)."""
        rows = self.ordered_rows()
        best = (self.crossings(rows), [list(r.slots) for r in rows])
        for sweep in range(SWEEPS):
            down = sweep % 2 == 0
            for row in rows if down else reversed(rows):
                self.sort_row(row, 1 if down else -1)
            score = self.crossings(rows)
            if score < best[0]:
                best = (score, [list(r.slots) for r in rows])
        for row, slots in zip(rows, best[1], strict=True):
            row.slots = slots

    def sort_row(self, row: Row, towards: int) -> None:
        """Sort ``row`` by where its neighbours in the row before it (the
        one above for a sweep down) stand; fixed slots keep their place."""

        def key(item: tuple[int, Slot]) -> float:
            i, s = item
            if s.fixed:
                return i - 1e6 if s.kind == "title" else float(i)
            found = [self.row_of[o].slots.index(o) for o, _, d in s.links if d == -towards]
            return sum(found) / len(found) if found else float(i)

        if all(s.fixed for s in row.slots):
            return
        row.slots = [s for _, s in sorted(enumerate(row.slots), key=key)]

    def spread(self) -> None:
        """Where each chain joins a child: along the side it uses, in the
        order of the slots it goes to next."""
        users: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for c in self.chains:
            path = self.paths[c.key]
            for end, nxt in ((c.start, path[1]), (c.end, path[-2])):
                if end.node is not None:
                    place = self.row_of[nxt].slots.index(nxt)
                    users.setdefault((end.node, end.side), []).append((place, c.key))
        for (node, side), found in users.items():
            found.sort()
            for k, (_, key) in enumerate(found):
                self.box_of[node].spots[key] = (side, (k + 1) / (len(found) + 1))
        for c in self.chains:  # a label on the outer side of its line
            path = self.paths[c.key]
            label = next((s for s in path if s.kind == "label"), None)
            joined = path[0] if c.start.node is not None else path[-1]
            if label is not None and joined.kid is not None:
                label.flip = joined.anchor(c.key) < joined.kid.box_w / 2 - 1e-6

    # --- positions ----------------------------------------------------------------------

    def gap(self, a: Slot, b: Slot) -> float:
        if a.kind == "box" and b.kind == "box":
            return GAP_REGION if self.parallel else GAP_BOX
        return GAP_LINE

    def fit(self) -> None:
        """Pack each row, then pull every slot towards its neighbours
        along the chains, row by row, a few times down and up."""
        rows = self.ordered_rows()
        for row in rows:
            x = 0.0
            for i, s in enumerate(row.slots):
                s.x = x
                if i + 1 < len(row.slots):
                    x += s.w + self.gap(s, row.slots[i + 1])
        for i in range(FITS):
            every = [s for r in rows for s in r.slots]
            middle = (min(s.x for s in every) + max(s.x + s.w for s in every)) / 2
            for row in rows if i % 2 == 0 else reversed(rows):
                want, weight = [], []
                for s in row.slots:
                    spots = [o.x + o.anchor(k) - s.anchor(k) for o, k, _ in s.links]
                    alone = s.x if s.kind == "title" else middle - s.w / 2
                    want.append(sum(spots) / len(spots) if spots else alone)
                    heavy = 2.0 if s.kind in ("via", "label") else 1.0
                    weight.append(heavy * len(spots) if spots else 1e-3)
                gaps = [self.gap(a, b) + a.w for a, b in itertools.pairwise(row.slots)]
                for s, x in zip(row.slots, _fit(want, weight, gaps), strict=True):
                    s.x = x
        left = min(s.x for r in rows for s in r.slots)
        for r in rows:
            for s in r.slots:
                s.x -= left

    def stack_up(self, head_w: float) -> None:
        """Heights of the rows and the gaps between them (steeper for
        arrows that move far sideways), then the container's size."""
        rows = self.ordered_rows()
        for row in rows:
            if row.is_label:
                row.h = LABEL_H
            elif row.level == 0:
                row.h = 2 * DOT_R if any(s.kind == "dot" for s in row.slots) else 0.0
            else:
                row.h = max((s.kid.h for s in row.slots if s.kid is not None), default=0.0)
        y = HEAD + 4
        for i, row in enumerate(rows):
            if i:
                y += self.spacing(rows[i - 1], row)
            row.y = y
            y += row.h
        inner = max(s.x + s.w for r in rows for s in r.slots)
        self.width = max(head_w, inner + 2 * PAD)
        self.left = (self.width - inner) / 2
        bottom = rows[-1].level == self.bottom_level
        self.height = y if bottom else y + PAD
        self.at = {kid: (self.left + s.x, self.row_of[s].y) for kid, s in self.box_of.items()}
        self.ports = {key: self.left + s.x for key, s in self.border_of.items()}

    def spacing(self, upper: Row, lower: Row) -> float:
        shift = 0.0
        for s in upper.slots:
            for o, k, d in s.links:
                if d > 0:
                    shift = max(shift, abs(o.x + o.anchor(k) - s.x - s.anchor(k)))
        if upper.is_label or lower.is_label:
            low = 10.0
        elif upper.level == 0 or lower.level == self.bottom_level:
            low = 18.0
        else:
            low = 30.0
        return max(low, min(48.0, 0.2 * shift))

    # --- drawing ----------------------------------------------------------------------

    def draw(
        self, box: Rect, kids: Mapping[str, Rect]
    ) -> tuple[dict[str, list[Point]], dict[str, Rect]]:
        """The chains' polylines and the labels' boxes, for the container
        drawn at ``box`` with its children at ``kids`` (absolute)."""
        ox = box.x + self.left
        pieces: dict[str, list[Point]] = {}
        labels: dict[str, Rect] = {}
        for c in self.chains:
            path = self.paths[c.key]
            points: list[Point] = []
            for i, s in enumerate(path):
                row = self.row_of[s]
                top, low = box.y + row.y, box.y + row.y + row.h
                x = ox + s.x + s.anchor(c.key)
                end: list[Point] = []  # a chain's end, from the box or border outwards
                if s.kid is not None:
                    px, py = s.port(c.key, kids[s.kid.id])
                    side = (c.start if i == 0 else c.end).side
                    end = [(px, py), (px, low if side == BOTTOM else top)]
                elif s.kind == "border":
                    edge_y = box.y if row.level == 0 else box.bottom
                    end = [(x, edge_y), (x, low if row.level == 0 else edge_y)]
                elif s.kind == "dot":
                    points.append((x, top + DOT_R))
                elif self.row_of[path[i - 1]] is self.row_of[path[i + 1]]:
                    points.append((x, top))  # a turn within a row: its lowest point
                elif self.row_of[path[i + 1]].level > row.level:  # going down
                    points += [(x, top), (x, low)]
                else:
                    points += [(x, low), (x, top)]
                points += end if i == 0 else end[::-1]
                if s.kind == "label":
                    left = x - s.w if s.flip else x + LABEL_DX
                    labels[c.key] = Rect(left, top, s.w - LABEL_DX, LABEL_H)
            pieces[c.key] = _clean(points)
        return pieces, labels

    def separators(self, box: Rect) -> list[tuple[float, float, float]]:
        """The dashed lines between a parallel state's regions (x, y1, y2)."""
        out = []
        regions = [s for s in self.rows.get(1, Row(1)).slots if s.kid is not None]
        for a, b in itertools.pairwise(regions):
            x = box.x + self.left + (a.x + a.w + b.x) / 2
            y = box.y + self.row_of[a].y
            out.append((x, y, y + self.row_of[a].h))
        return out


def _fit(want: list[float], weight: list[float], gaps: list[float]) -> list[float]:
    """The positions closest to ``want`` (weighted least squares) with
    ``x[i + 1] >= x[i] + gaps[i]``: pool-adjacent-violators on the
    positions less their fixed offsets."""
    offsets = [0.0, *itertools.accumulate(gaps)]
    blocks: list[list[float]] = []  # value, weight, count
    for w, o, wt in zip(want, offsets, weight, strict=True):
        blocks.append([w - o, wt, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    out: list[float] = []
    for value, _, count in blocks:
        out += [value] * int(count)
    return [v + o for v, o in zip(out, offsets, strict=True)]


def _clean(points: list[Point]) -> list[Point]:
    """Without repeated points and the middle of three in a line."""
    out: list[Point] = []
    for p in points:
        if out and abs(p[0] - out[-1][0]) < 1e-6 and abs(p[1] - out[-1][1]) < 1e-6:
            continue
        if len(out) >= 2:
            (ax, ay), (bx, by) = out[-2], out[-1]
            in_line = abs((bx - ax) * (p[1] - ay) - (by - ay) * (p[0] - ax)) < 1e-6
            if in_line and (bx - ax) * (p[0] - bx) + (by - ay) * (p[1] - by) >= 0:
                out[-1] = p
                continue
        out.append(p)
    return out
