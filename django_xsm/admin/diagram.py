"""A statechart as a self-contained SVG (server-side; nothing is fetched).

Every state is a box; compound and parallel states hold their children
(parallel regions get dashed borders), final states a double border,
history states a small "H"/"H*" box. A state lists its own transitions
under its name (``PAY → paid [guard]``) instead of drawing routed arrows,
so the picture stays readable however deep the chart is. Active states get
the ``xsm-active`` class, ``data-active="true"`` and a green fill.

Every string taken from the chart (keys, events, guards) is HTML-escaped:
the SVG is inlined in the admin page, so the chart must not be able to
inject markup.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from django_xsm.engine import Machine, StateNode, Transition

__all__ = ["describe_transition", "render_svg", "short_id"]

CHAR_W = 7.3  # advance of one 12px monospace character
LABEL_H = 22.0
LINE_H = 15.0
PAD = 8.0
GAP = 14.0
MAX_ROW_W = 820.0
MIN_W = 90.0


def short_id(machine: Machine, state_id: str) -> str:
    """``state_id`` without the machine id (``order.paid`` -> ``paid``)."""
    head = f"{machine.id}."
    return state_id[len(head) :] if state_id.startswith(head) else state_id


def describe_transition(machine: Machine, transition: Transition) -> str:
    """One line for a transition: ``PAY → paid [guard]``, ``after 1000 → x``."""
    kind = getattr(transition, "kind", "on")
    if kind == "always" or not transition.event:
        label = "always"
    elif kind == "after":
        label = f"after {transition.delay}"
    elif kind in ("onDone", "done"):
        label = "onDone"
    else:
        label = transition.event
    targets = ", ".join(short_id(machine, t) for t in transition.target_ids)
    text = f"{label} → {targets}" if targets else f"{label} (no target)"
    if transition.guard_name:
        text += f" [{transition.guard_name}]"
    return text


@dataclass
class _Box:
    node: StateNode
    label: str
    lines: list[str]
    w: float = 0.0
    h: float = 0.0
    head_h: float = 0.0
    kids: list[tuple[float, float, _Box]] = field(default_factory=list)


def _measure(machine: Machine, node: StateNode, *, is_root: bool) -> _Box:
    if node.type == "history":
        label = "H*" if node.history == "deep" else "H"
        box = _Box(node, label, [])
        box.w, box.h, box.head_h = 36.0, 28.0, 28.0
        return box
    label = machine.id if is_root else node.key
    parent = node.parent
    if parent is not None and parent.type == "compound" and parent.initial == node.key:
        label = f"● {label}"  # the initial child
    lines = [describe_transition(machine, t) for t in node.transitions]
    box = _Box(node, label, lines)
    text_w = max(len(s) for s in [label, *lines]) * CHAR_W + 2 * PAD
    box.head_h = LABEL_H + len(lines) * LINE_H + (4.0 if lines else 0.0)
    children = [_measure(machine, c, is_root=False) for c in node.children]
    rows: list[list[_Box]] = []
    width = 0.0
    for child in children:
        if rows and width + GAP + child.w <= MAX_ROW_W:
            rows[-1].append(child)
            width += GAP + child.w
        else:
            rows.append([child])
            width = child.w
    y = box.head_h
    inner_w = 0.0
    for row in rows:
        x = PAD
        for child in row:
            box.kids.append((x, y, child))
            x += child.w + GAP
        inner_w = max(inner_w, x - GAP + PAD)
        y += max(c.h for c in row) + GAP
    box.w = max(MIN_W, text_w, inner_w)
    box.h = (y - GAP + PAD) if rows else max(box.head_h + 4.0, 34.0)
    return box


def _style(node: StateNode, active: bool, in_parallel: bool) -> str:
    # The root is always active: it is drawn plain, so the highlight means
    # something. Active leaves are filled; active containers only outlined.
    lit = active and node.parent is not None
    if lit:
        fill = "#f2faf3" if node.children else "#bfe9c9"
    else:
        fill = "#f6f8fa" if node.children else "#ffffff"
    stroke = "#1b7f3b" if lit else "#8a949e"
    width = "2.5" if lit else "1.2"
    dash = ' stroke-dasharray="6 4"' if in_parallel else ""
    return f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"{dash}'


def _render(box: _Box, x: float, y: float, active: Collection[str], in_parallel: bool) -> str:
    node = box.node
    is_active = node.id in active
    lit = is_active and node.parent is not None  # the root is always active
    classes = f"xsm-state xsm-{node.type}" + (" xsm-active" if lit else "")
    out = [
        f'<g class="{classes}" data-state-id="{escape(node.id)}" '
        f'data-active="{"true" if is_active else "false"}">',
        f"<title>{escape(node.id)} ({escape(node.type)}{', active' if is_active else ''})</title>",
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="6" '
        f"{_style(node, is_active, in_parallel)}/>",
    ]
    if node.type == "final":
        out.append(
            f'<rect x="{x + 3:.1f}" y="{y + 3:.1f}" width="{box.w - 6:.1f}" '
            f'height="{box.h - 6:.1f}" rx="4" fill="none" stroke="#8a949e" stroke-width="1"/>'
        )
    if node.type == "history":
        out.append(
            f'<text x="{x + box.w / 2:.1f}" y="{y + 18:.1f}" text-anchor="middle" '
            f'class="xsm-label">{escape(box.label)}</text>'
        )
    else:
        weight = "bold" if is_active or node.children else "normal"
        out.append(
            f'<text x="{x + PAD:.1f}" y="{y + 15:.1f}" font-weight="{weight}" '
            f'class="xsm-label">{escape(box.label)}</text>'
        )
        for i, line in enumerate(box.lines):
            out.append(
                f'<text x="{x + PAD:.1f}" y="{y + LABEL_H + 11 + i * LINE_H:.1f}" '
                f'class="xsm-transition" fill="#40505f">{escape(line)}</text>'
            )
    regions = node.type == "parallel"
    for dx, dy, kid in box.kids:
        out.append(_render(kid, x + dx, y + dy, active, regions))
    out.append("</g>")
    return "\n".join(out)


def render_svg(machine: Machine, active: Collection[str] = ()) -> SafeString:
    """The chart of ``machine`` as an ``<svg>`` element, states whose full
    id is in ``active`` highlighted. Safe to inline: all text is escaped."""
    root = _measure(machine, machine.root, is_root=True)
    width, height = root.w + 4, root.h + 4
    active_ids = set(active)
    names = ", ".join(
        short_id(machine, n.id) for n in machine.nodes if n.id in active_ids and n.parent
    )
    body = _render(root, 2.0, 2.0, active_ids, False)
    # Every string interpolated above and here is escaped.
    return mark_safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="xsm-diagram" role="img" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.1f} {height:.1f}" '
        f'font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" '
        f'font-size="12" aria-label="State diagram of {escape(machine.id)}; active: '
        f'{escape(names or "none")}">\n{body}\n</svg>'
    )
