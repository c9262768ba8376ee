"""``manage.py xsm_graph MACHINE``: a machine's chart as SVG, DOT or Mermaid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from django_xsm.diagram import chart_graph, draw, to_dot, to_mermaid
from django_xsm.management import XsmCommand, command_errors, int_type
from django_xsm.registry import InstanceDoesNotExist, MachineEntry, machines

FORMATS = ("svg", "dot", "mermaid")


def find_machine(name: str) -> MachineEntry:
    """The registered machine named ``name`` (its ``XSM['MACHINES']`` name,
    or its chart's id); a ``CommandError`` listing the known ones else."""
    entry = machines.get(name)
    if entry is None:
        entry = next((e for e in machines.values() if e.machine.id == name), None)
    if entry is None:
        known = ", ".join(machines.names()) or "none (XSM['MACHINES'] is empty)"
        problems = "".join(f"; {p.text}" for p in machines.problems)
        raise CommandError(
            f"Unknown machine {name!r}; the registered machines are: {known}{problems}"
        )
    return entry


class Command(XsmCommand):
    help = """Draw a machine's chart: --format svg (Graphviz's dot when it is
installed, else the built-in layout; XSM['DIAGRAM']['RENDERER'] decides),
dot (the DOT source; needs no Graphviz) or mermaid (stateDiagram-v2, for
docs and READMEs). --instance KEY highlights that instance's active states
and the transitions of its last --log records.

examples:
  manage.py xsm_graph order > order.svg
  manage.py xsm_graph order --format dot | dot -Tpng > order.png
  manage.py xsm_graph order --format mermaid --output docs/order.mmd
  manage.py xsm_graph order --instance order:42 --output order-42.svg
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "machine", metavar="MACHINE", help="A registered machine (name or chart id)."
        )
        parser.add_argument("--format", choices=FORMATS, default="svg", help="Default: svg.")
        parser.add_argument(
            "--output", metavar="FILE", help="Write to FILE instead of standard output."
        )
        parser.add_argument(
            "--instance", metavar="KEY", help="Highlight this instance's state and path."
        )
        parser.add_argument(
            "--log",
            type=int_type("--log", minimum=0, maximum=1000),
            default=50,
            metavar="N",
            help="With --instance: how many of its last transitions make the path "
            "(default 50, 0 for none).",
        )
        parser.add_argument(
            "--renderer",
            choices=("auto", "graphviz", "builtin"),
            help="With --format svg: who draws (default: XSM['DIAGRAM']['RENDERER']).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with command_errors():
            entry = find_machine(options["machine"])
            active: tuple[str, ...] = ()
            records: list[Any] = []
            key = options["instance"]
            if key is not None:
                try:
                    active = entry.objects.get(key).state_ids
                except InstanceDoesNotExist as exc:
                    raise CommandError(
                        f"No instance {key!r} of machine {entry.name!r}; check the key "
                        "(`manage.py xsm_inspect KEY` shows what it holds)"
                    ) from exc
                if options["log"]:
                    records = entry.objects.latest(key, options["log"])
            graph = chart_graph(entry.machine, active, records)
            text = self.render(graph, options["format"], options["renderer"])
        self.write(text, options["output"])

    def render(self, graph: Any, fmt: str, renderer: str | None) -> str:
        if fmt == "dot":
            return to_dot(graph)
        if fmt == "mermaid":
            return to_mermaid(graph)
        drawing = draw(graph, renderer)
        if drawing.note:
            if renderer == "graphviz":
                raise CommandError(
                    f"{drawing.note}; install Graphviz (apt-get install graphviz) "
                    "or use --renderer builtin"
                )
            self.stderr.write(f"{drawing.note}: drawn with the built-in layout")
        return drawing.svg + "\n"

    def write(self, text: str, output: str | None) -> None:
        if output is None or output == "-":
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror or exc}") from exc
        self.say(f"Wrote {output}", level=1, style=self.style.SUCCESS)
