"""The built-in layout: boxes and arrows in pure Python, for hosts without
Graphviz.

Layered per container, bottom-up: a compound state's children are ranked
by breadth-first distance from its initial child along the arrows between
them (an arrow from or to a descendant counts for the child holding it),
one row per rank, rows centred, each row ordered by where its
predecessors stand (fewer crossings); a parallel state's regions stand
side by side. History markers sit at the bottom right of their container (what
returns to them is usually ranked below it). Arrows are straight, from
the side of one box facing the other to the facing side of the other,
their ends spread along each side (two arrows between the same states
run side by side);
self-loops and targetless transitions loop on a box's right side;
arrows between a container and its own descendant run along the right.
Labels go where they overlap nothing already placed, as far as a few
tries find. Legible, not optimal: monospace text makes widths exact
enough without font metrics.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque

from .graph import Edge, Graph, Node
from .shapes import (
    LABEL_H,
    Layout,
    Point,
    Rect,
    Route,
    along,
    along_side,
    badge_text,
    label_size,
    mean,
    overlap,
    sides,
)

__all__ = ["Layout", "Rect", "Route", "badge_text", "label_size", "layout"]

CW = 7.25  # advance of a 12px monospace character
LEAF_H, MIN_W, PADX = 30.0, 64.0, 12.0
HEAD, PAD, INIT_H = 26.0, 14.0, 30.0
GAP_X, GAP_Y, REGION_GAP = 46.0, 60.0, 22.0
HIST = 26.0
MARGIN = 6.0


class _Builder:
    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.size: dict[str, list[float]] = {}
        self.rel: dict[str, tuple[float, float]] = {}
        self.boxes: dict[str, Rect] = {}
        self.loops: dict[str, list[Edge]] = defaultdict(list)
        for e in graph.edges:
            if e.source == e.target:
                self.loops[e.source].append(e)
        self.out = Layout(0, 0, self.boxes)

    # --- sizes, bottom-up ---------------------------------------------------------

    def loop_margin(self, node_id: str) -> float:
        loops = self.loops.get(node_id, [])
        if not loops:
            return 0.0
        return 18 + 8 * (len(loops) - 1) + max(label_size(e)[0] for e in loops) + 6

    def footprint(self, node_id: str) -> float:
        return self.size[node_id][0] + self.loop_margin(node_id)

    def measure(self, node: Node) -> None:
        if node.kind == "history":
            self.size[node.id] = [HIST, HIST]
            return
        if not node.is_container:
            loops = len(self.loops.get(node.id, []))
            width = max(MIN_W, len(node.label) * CW + 2 * PADX)
            self.size[node.id] = [width, max(LEAF_H, 14 + 12 * loops)]
            return
        kids = [self.g.nodes[c] for c in node.children]
        for kid in kids:
            self.measure(kid)
        hist = [k for k in kids if k.kind == "history"]
        states = [k for k in kids if k.kind != "history"]
        head_w = max(len(node.label) * CW * 1.08 + 2 * PADX, len(hist) * (HIST + 6) + PAD)
        if node.kind == "parallel":
            inner_w, inner_h = self.regions(states)
            top = HEAD + 4
        else:
            inner_w, inner_h = self.ranks(node, states)
            top = HEAD + (INIT_H if node.initial is not None else 6)
        for i, h in enumerate(hist):  # right-aligned in a strip at the bottom
            self.rel[h.id] = (-(i + 1) * (HIST + 6), 0.0)
        foot = HIST + 8 if hist else 0.0
        width = max(head_w, inner_w + 2 * PAD)
        offset = (width - inner_w) / 2
        for s in states:
            x, y = self.rel[s.id]
            self.rel[s.id] = (x + offset, y + top)
        for h in hist:
            x, _ = self.rel[h.id]
            self.rel[h.id] = (width + x - PAD / 2, top + inner_h + 8)
        self.size[node.id] = [width, top + inner_h + foot + PAD]

    def regions(self, states: list[Node]) -> tuple[float, float]:
        height = max((self.size[s.id][1] for s in states), default=0.0)
        x = 0.0
        for s in states:
            self.size[s.id][1] = height  # regions share one height
            self.rel[s.id] = (x, 0.0)
            x += self.footprint(s.id) + REGION_GAP
        return max(0.0, x - REGION_GAP), height

    def ranks(self, node: Node, states: list[Node]) -> tuple[float, float]:
        ids = [s.id for s in states]
        succ: dict[str, list[str]] = {i: [] for i in ids}
        pred: dict[str, list[str]] = {i: [] for i in ids}
        between: dict[tuple[str, str], int] = defaultdict(int)
        room = 0.0  # beside the widest box, for the labels of arrows beside it
        for e in self.g.edges:
            if e.source == e.target or e.kind == "history":
                continue
            a = self.g.child_towards(node.id, e.source)
            b = self.g.child_towards(node.id, e.target)
            if a in succ and b in succ and a != b:
                succ[a].append(b)
                pred[b].append(a)
                between[(a, b)] += 1
                room = max(room, label_size(e)[0] + 10)
        rank: dict[str, int] = {}
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
        rows: list[list[str]] = [[] for _ in range(max(rank.values(), default=-1) + 1)]
        for i in ids:
            rows[rank[i]].append(i)
        place: dict[str, float] = {}
        for r, row in enumerate(rows):
            if r:
                row.sort(key=lambda i: mean([place[p] for p in pred[i] if p in place], 1e9))
            for k, i in enumerate(row):
                place[i] = k + 0.0
        widths = [sum(self.footprint(i) for i in row) + GAP_X * (len(row) - 1) for row in rows]
        widest = max((self.footprint(i) for i in ids), default=0.0)
        inner_w = max([*widths, widest + 2 * min(room, 160.0)])
        y = 0.0
        for r, row in enumerate(rows):
            x = (inner_w - widths[r]) / 2
            for i in row:
                self.rel[i] = (x, y)
                x += self.footprint(i) + GAP_X
            y += max(self.size[i][1] for i in row)
            if r + 1 < len(rows):
                below = set(rows[r + 1])
                labels = sum(
                    n
                    for (a, b), n in between.items()
                    if (a in row and b in below) or (b in row and a in below)
                )
                y += GAP_Y + 12 * max(0, min(labels, 8) - 2)
        return inner_w, y

    def place(self, node: Node, x: float, y: float) -> None:
        w, h = self.size[node.id]
        self.boxes[node.id] = Rect(x, y, w, h)
        for child in node.children:
            dx, dy = self.rel[child]
            self.place(self.g.nodes[child], x + dx, y + dy)
        if node.kind == "compound" and node.initial is not None:
            target = self.boxes[node.initial]
            dot = (target.cx, target.y - INIT_H + 8)
            self.out.initials.append((node.id, dot, (target.cx, target.y)))
        if node.kind == "parallel":
            states = [c for c in node.children if self.g.nodes[c].kind != "history"]
            for left in states[:-1]:
                box = self.boxes[left]
                sep_x = box.x + self.footprint(left) + REGION_GAP / 2
                self.out.separators.append((node.id, sep_x, box.y, box.bottom))

    # --- arrows -----------------------------------------------------------------

    def route_all(self) -> None:
        nested: dict[tuple[str, str], list[Edge]] = defaultdict(list)
        ports: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
        facing: dict[str, tuple[str, str]] = {}
        for e in self.g.edges:
            if e.source == e.target:
                continue
            if e.source in self.g.ancestors(e.target) or e.target in self.g.ancestors(e.source):
                inner = e.target if e.source in self.g.ancestors(e.target) else e.source
                nested[(inner, e.target if inner == e.source else e.source)].append(e)
                continue
            s, t = self.boxes[e.source], self.boxes[e.target]
            facing[e.id] = (out_side, in_side) = sides(s, t)
            # ports along a side are ordered by where the other end is
            ports[(e.source, out_side)].append((along_side(t, out_side), f"{e.id}:s"))
            ports[(e.target, in_side)].append((along_side(s, in_side), f"{e.id}:t"))
        spot: dict[str, Point] = {}
        for (node_id, where), users in ports.items():
            users.sort()
            for k, (_, key) in enumerate(users):
                spot[key] = self.port(node_id, where, (k + 1) / (len(users) + 1))
        routes: dict[str, Route] = {}
        for node_id, loops in self.loops.items():
            box = self.boxes[node_id]
            for k, e in enumerate(loops):
                step = box.h / (len(loops) + 1)
                y1, y2 = box.y + step * (k + 0.5), box.y + step * (k + 1.5) - 4
                out = box.right + 14 + 8 * k
                points = [(box.right, y1), (out, y1), (out, y2), (box.right, y2)]
                routes[e.id] = Route(e, points)
        for (inner, outer), edges in nested.items():
            i_box, o_box = self.boxes[inner], self.boxes[outer]
            for k, e in enumerate(edges):
                y = i_box.cy + (k - (len(edges) - 1) / 2) * 9
                ends = [(i_box.right, y), (o_box.right, y)]
                routes[e.id] = Route(e, ends if e.source == inner else ends[::-1])
        for e in self.g.edges:
            if e.id in facing:
                routes[e.id] = Route(e, [spot[f"{e.id}:s"], spot[f"{e.id}:t"]])
        self.out.routes = [routes[e.id] for e in self.g.edges]
        self.labels()

    def port(self, node_id: str, side: str, f: float) -> Point:
        """The point at fraction ``f`` of ``side`` of a box (the middle 70%;
        a history circle's ports are on its outline)."""
        box = self.boxes[node_id]
        if self.g.nodes[node_id].kind == "history":
            angle = {"top": -math.pi / 2, "bottom": math.pi / 2, "left": math.pi, "right": 0.0}
            a = angle[side] + (f - 0.5) * 1.2 * (1 if side in ("bottom", "left") else -1)
            return (box.cx + math.cos(a) * box.w / 2, box.cy + math.sin(a) * box.h / 2)
        g = 0.15 + 0.7 * f
        if side in ("top", "bottom"):
            return (box.x + box.w * g, box.y if side == "top" else box.bottom)
        return (box.x if side == "left" else box.right, box.y + box.h * g)

    def labels(self) -> None:
        taken: list[Rect] = [b for i, b in self.boxes.items() if not self.g.nodes[i].is_container]
        taken += [Rect(d[0] - 6, d[1] - 6, 12, 12) for _, d, _ in self.out.initials]
        ordered = sorted(self.out.routes, key=lambda r: r.edge.source == r.edge.target)
        for route in ordered:
            w, _ = label_size(route.edge)
            if not w:
                continue
            if route.edge.source == route.edge.target:  # beside its loop, past the outermost
                box = self.boxes[route.edge.source]
                x = box.right + 14 + 8 * (len(self.loops[route.edge.source]) - 1) + 6
                y = (route.points[1][1] + route.points[2][1]) / 2
                spot = Rect(x, y - LABEL_H / 2, w, LABEL_H)
            else:
                s, t = self.boxes[route.edge.source], self.boxes[route.edge.target]
                spot = self.free_spot(route.points, w, taken, (s.cx + t.cx) / 2)
            route.label = spot
            taken.append(spot)

    def free_spot(self, points: list[Point], w: float, taken: list[Rect], middle: float) -> Rect:
        """A label box beside the arrow (right or left of a steep one,
        above or below a flat one), the first try overlapping no label or
        state placed so far, else the one overlapping least."""
        best: tuple[float, Rect] | None = None
        for t in (0.5, 0.35, 0.65, 0.22, 0.78):
            x, y = along(points, t)
            (ax, ay), (bx, by) = points[0], points[-1]
            if abs(by - ay) >= abs(bx - ax):  # steep: the outer side first
                top = y - LABEL_H / 2
                tries = [(x + 5, top), (x - w - 5, top), (x + 45, top), (x - w - 45, top)]
                if x < middle:
                    tries = [tries[1], tries[0], tries[3], tries[2]]
            else:
                tries = [(x - w / 2, y - LABEL_H - 3), (x - w / 2, y + 3)]
            for left, top in tries:
                spot = Rect(left, top, w, LABEL_H)
                clash = sum(overlap(spot, other) for other in taken)
                if not clash:
                    return spot
                if best is None or clash < best[0]:
                    best = (clash, spot)
        assert best is not None
        return best[1]


def layout(graph: Graph) -> Layout:
    """Positions for every state, initial marker, region separator and
    arrow of ``graph`` (absolute, in px; the top-left is 0, 0)."""
    builder = _Builder(graph)
    root = graph.nodes[graph.root]
    builder.measure(root)
    builder.place(root, MARGIN, MARGIN)
    builder.route_all()
    out = builder.out
    right = max(b.right + builder.loop_margin(i) for i, b in builder.boxes.items())
    bottom = max(b.bottom for b in builder.boxes.values())
    for route in out.routes:
        xs = [p[0] for p in route.points] + ([route.label.right] if route.label else [])
        ys = [p[1] for p in route.points] + ([route.label.bottom] if route.label else [])
        right, bottom = max(right, *xs), max(bottom, *ys)
    left = min([0.0] + [r.label.x for r in out.routes if r.label])
    top = min([0.0] + [r.label.y for r in out.routes if r.label])
    if left < 0 or top < 0:
        _shift(out, -left + MARGIN if left < 0 else 0.0, -top + MARGIN if top < 0 else 0.0)
        right, bottom = right - min(left, 0) + MARGIN, bottom - min(top, 0) + MARGIN
    out.width, out.height = right + MARGIN, bottom + MARGIN
    return out


def _shift(out: Layout, dx: float, dy: float) -> None:
    for box in out.boxes.values():
        box.x, box.y = box.x + dx, box.y + dy
    out.initials = [(i, (a[0] + dx, a[1] + dy), (b[0] + dx, b[1] + dy)) for i, a, b in out.initials]
    out.separators = [(i, x + dx, y1 + dy, y2 + dy) for i, x, y1, y2 in out.separators]
    for route in out.routes:
        route.points = [(x + dx, y + dy) for x, y in route.points]
        if route.label:
            route.label.x, route.label.y = route.label.x + dx, route.label.y + dy
