"""The admin's state diagram: :mod:`django_xsm.diagram`, which draws it
(Graphviz or the built-in layout), under the name the admin has always
used. ``render_svg(machine, active_ids, log)`` is usable on its own."""

from __future__ import annotations

from django_xsm.diagram import describe_transition, render_svg, short_id

__all__ = ["describe_transition", "render_svg", "short_id"]
