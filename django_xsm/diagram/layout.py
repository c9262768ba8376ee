"""The built-in layout: boxes and arrows in pure Python, for hosts without
Graphviz.

Sizes bottom-up, positions top-down. A leaf is as wide as its name; a
container holds its children in rows (:mod:`.rows`) with a title strip on
top. Every arrow but a self-loop is cut into one chain per container it
crosses (:mod:`.chains`), laid out by that container with its children.
Self-loops and targetless transitions loop on a box's right side, in room
its row keeps for them, their labels beside them. Monospace text makes
widths exact enough without font metrics.
"""

from __future__ import annotations

from collections import defaultdict

from .chains import Split, split
from .graph import Edge, Graph, Node
from .rows import Kid, Stack, levels
from .shapes import LABEL_H, PADX, Layout, Point, Rect, Route, badge_text, label_size

__all__ = ["Layout", "Rect", "Route", "badge_text", "label_size", "layout"]

CW = 7.25  # advance of a 12px monospace character
LEAF_H, MIN_W = 30.0, 64.0
LOOP_STEP = 16.0  # between the loops of one box (a label's height, and some)
HIST = 26.0
MARGIN = 6.0


class _Builder:
    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.size: dict[str, list[float]] = {}
        self.boxes: dict[str, Rect] = {}
        self.stacks: dict[str, Stack] = {}
        self.loops: dict[str, list[Edge]] = defaultdict(list)
        for e in graph.edges:
            if e.source == e.target:
                self.loops[e.source].append(e)
        level: dict[str, float] = {}
        for node in graph.nodes.values():
            if node.is_container:
                level.update(levels(graph, node.id))
        self.level = level
        self.split: Split = split(graph, level)
        self.out = Layout(0, 0, self.boxes)

    # --- sizes, bottom-up ---------------------------------------------------------

    def loop_margin(self, node_id: str) -> float:
        loops = self.loops.get(node_id, [])
        if not loops:
            return 0.0
        return 18 + 8 * (len(loops) - 1) + max(label_size(e)[0] for e in loops) + 6

    def loops_height(self, node_id: str) -> float:
        """The height a box needs for its loops' labels to clear each other."""
        loops = len(self.loops.get(node_id, []))
        return 0.0 if loops < 2 else LOOP_STEP * (loops + 1)

    def measure(self, node: Node) -> None:
        if node.kind == "history":
            self.size[node.id] = [HIST, HIST]
            return
        if not node.is_container:
            width = max(MIN_W, len(node.label) * CW + 2 * PADX)
            self.size[node.id] = [width, max(LEAF_H, self.loops_height(node.id))]
            return
        kids = [self.g.nodes[c] for c in node.children]
        for kid in kids:
            self.measure(kid)
        if node.kind == "parallel":  # regions share one height
            tallest = max((self.size[k.id][1] for k in kids if k.region), default=0.0)
            for k in kids:
                if k.region:
                    self.size[k.id][1] = tallest
        title_w = len(node.label) * CW * 1.08
        stack = Stack(
            parallel=node.kind == "parallel",
            kids=[
                Kid(
                    k.id,
                    self.size[k.id][0] + self.loop_margin(k.id),
                    self.size[k.id][0],
                    self.size[k.id][1],
                    int(self.level[k.id]),
                    circle=k.kind == "history",
                    ports=self.stacks[k.id].ports if k.id in self.stacks else {},
                )
                for k in kids
            ],
            chains=self.split.chains.get(node.id, []),
            borders=self.split.borders.get(node.id, []),
            title_w=title_w + PADX,
            head_w=title_w + 2 * PADX,
        )
        self.stacks[node.id] = stack
        self.size[node.id] = [stack.width, max(stack.height, self.loops_height(node.id))]

    def place(self, node: Node, x: float, y: float) -> None:
        w, h = self.size[node.id]
        self.boxes[node.id] = Rect(x, y, w, h)
        stack = self.stacks.get(node.id)
        if stack is None:
            return
        for child in node.children:
            dx, dy = stack.at[child]
            self.place(self.g.nodes[child], x + dx, y + dy)
        if node.kind == "parallel":
            for sx, y1, y2 in stack.separators(self.boxes[node.id]):
                self.out.separators.append((node.id, sx, y1, y2))

    # --- arrows -----------------------------------------------------------------

    def route_all(self) -> None:
        pieces: dict[tuple[str, str], list[Point]] = {}
        labels: dict[str, Rect] = {}
        for node_id, stack in self.stacks.items():
            drawn, placed = stack.draw(
                self.boxes[node_id], {c: self.boxes[c] for c in self.g.nodes[node_id].children}
            )
            for key, piece in drawn.items():
                pieces[(node_id, key)] = piece
            labels.update(placed)
            init = f"init:{node_id}"
            if init in drawn:
                self.out.initials.append((node_id, drawn[init]))
        routes: dict[str, Route] = {}
        for node_id, loops in self.loops.items():
            box = self.boxes[node_id]
            step = box.h / (len(loops) + 1)
            for k, e in enumerate(loops):
                y1, y2 = box.y + step * (k + 0.5), box.y + step * (k + 1.5) - 4
                out = box.right + 14 + 8 * k
                route = Route(e, [(box.right, y1), (out, y1), (out, y2), (box.right, y2)])
                w, _ = label_size(e)
                if w:  # beside its loop, past the outermost
                    lx = box.right + 14 + 8 * (len(loops) - 1) + 6
                    route.label = Rect(lx, (y1 + y2) / 2 - LABEL_H / 2, w, LABEL_H)
                routes[e.id] = route
        for e in self.g.edges:
            if e.id in routes:
                continue
            joined: list[Point] = []
            for container in self.split.through[e.id]:
                piece = pieces[(container, e.id)]
                joined += piece[1:] if joined and _same(joined[-1], piece[0]) else piece
            routes[e.id] = Route(e, joined, labels.get(e.id))
        self.out.routes = [routes[e.id] for e in self.g.edges]


def _same(a: Point, b: Point) -> bool:
    return abs(a[0] - b[0]) < 1e-6 and abs(a[1] - b[1]) < 1e-6


def layout(graph: Graph) -> Layout:
    """Positions for every state, initial arrow, region separator and
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
    out.width, out.height = right + MARGIN, bottom + MARGIN
    return out
