"""Run the side-by-side harness for the peer and for django-xsm, in rounds.

The peer, ``xstate-statemachine`` 0.11.0 from PyPI, runs in a virtualenv
of its own (``.venv-peer`` at the repository root, created by ``setup``;
never a dependency of the project, never imported by it); django-xsm runs
in the interpreter that runs this script, through ``bench/xsm_adapter.py``.
Both run the same file, ``bench/peer/harness.py`` (or ``rt_count.py``),
one process per side and round; rounds alternate the order of the sides.
The raw JSON of every run, ``summary.json`` and ``table.md`` go to
``--out`` (default ``bench/results/peer/<UTC stamp>/``).

Usage (from the repository root, with the project's virtualenv)::

    python bench/peer/run.py setup        # the peer's virtualenv (pip install, once)
    python bench/peer/run.py persisted --rounds 3 -- --locks optimistic --no-fakeredis
    python bench/peer/run.py engine --rounds 3
    python bench/peer/run.py imports
    python bench/peer/run.py rt           # round trips per request (client and MONITOR)

Arguments after ``--`` go to every harness run. ``persisted`` and ``rt``
start a throw-away ``redis-server`` per run on a free loopback port
(``--start-redis``; the harness flushes the database it is given, so never
point it at a server that holds data). ``--adapters`` names the classes of
``bench/xsm_adapter.py`` to run for django-xsm (default: ``Adapter`` and
``AdapterKeyAtOpen``; ``engine`` and ``imports``: ``Adapter``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEER_VENV = ROOT / ".venv-peer"
PEER_PACKAGES = ("xstate-statemachine[redis]==0.11.0", "fakeredis", "lupa", "redis")
PEER = "peer"


def peer_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def cmd_setup(venv: Path, python: str) -> None:
    """Create the peer's virtualenv (if missing) and install the peer."""
    if not peer_python(venv).exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(peer_python(venv)), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True
    )
    version = subprocess.run(
        [
            str(peer_python(venv)),
            "-c",
            "from importlib.metadata import version; print(version('xstate-statemachine'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"xstate-statemachine {version} in {venv}")


def _run(argv: list[str], out: Path) -> Any:
    """One harness process; its JSON report (``--json out``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([*argv, "--json", str(out)], cwd=ROOT, env=env, check=True)
    return json.loads(out.read_text(encoding="utf-8"))


def _sides(what: str, venv: Path, adapters: list[str]) -> dict[str, list[str]]:
    """The command line of each side (without ``--json``)."""
    script = "rt_count.py" if what == "rt" else "harness.py"
    flags = {
        "persisted": ["--persisted", "--start-redis"],
        "engine": ["--engine"],
        "imports": ["--imports"],
        "rt": ["--start-redis", "--monitor", "--new-key"],
    }[what]
    sides = {PEER: [str(peer_python(venv)), str(HERE / script), *flags]}
    for name in adapters:
        sides[name] = [
            sys.executable,
            str(HERE / script),
            *flags,
            "--adapter",
            f"bench.xsm_adapter:{name}",
        ]
    return sides


def run_rounds(
    what: str, venv: Path, adapters: list[str], rounds: int, extra: list[str], out: Path
) -> dict[str, list[Any]]:
    """Every side once per round, the order reversed every other round."""
    sides = _sides(what, venv, adapters)
    results: dict[str, list[Any]] = {name: [] for name in sides}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for name in order:
            print(f"-- round {r + 1}/{rounds}: {name} {what}", flush=True)
            results[name].append(_run([*sides[name], *extra], out / f"{what}-r{r + 1}-{name}.json"))
    return results


# --- tables ----------------------------------------------------------------------------------


def _ratios(peer: list[float], ours: list[float], higher_is_better: bool) -> str:
    per_round = [(o / p if higher_is_better else p / o) for p, o in zip(peer, ours, strict=True)]
    med = statistics.median(ours) / statistics.median(peer)
    med = med if higher_is_better else 1 / med
    return f"{med:.1f}x ({', '.join(f'{x:.1f}' for x in per_round)})"


def table_persisted(results: dict[str, list[Any]]) -> list[str]:
    names = [n for n in results if n != PEER]
    head = "| backend | plugins | lock | peer µs | " + " | ".join(
        f"{n} µs | ratio (rounds)" for n in names
    )
    lines = [head + " |", "|" + " --- |" * (4 + 2 * len(names))]
    for i, row in enumerate(results[PEER][0]["persisted"]):
        peer = [run["persisted"][i]["median_us"] for run in results[PEER]]
        cells = [row["backend"], row["plugins"], row["lock"], f"{statistics.median(peer):.0f}"]
        for name in names:
            theirs = [run["persisted"][i] for run in results[name]]
            assert all((t["plugins"], t["lock"]) == (row["plugins"], row["lock"]) for t in theirs)
            ours = [t["median_us"] for t in theirs]
            cells += [f"{statistics.median(ours):.0f}", _ratios(peer, ours, False)]
        lines.append("| " + " | ".join(cells) + " |")
    cpu = ["", "client CPU µs per request (median of the rounds):"]
    for name, runs in results.items():
        per_row = [
            statistics.median(run["persisted"][i]["client_cpu_us_per_send"] for run in runs)
            for i in range(len(runs[0]["persisted"]))
        ]
        cpu.append(f"- {name}: " + " / ".join(f"{x:.0f}" for x in per_row))
    return lines + cpu


def table_engine(results: dict[str, list[Any]]) -> list[str]:
    names = [n for n in results if n != PEER]
    lines = [
        "| mode | peer events/s | "
        + " | ".join(f"{n} events/s | ratio (rounds)" for n in names)
        + " |",
        "|" + " --- |" * (2 + 2 * len(names)),
    ]
    for mode in results[PEER][0]["engine"]:
        peer = [run["engine"][mode]["median_events_per_s"] for run in results[PEER]]
        cells = [mode, f"{statistics.median(peer):.0f}"]
        for name in names:
            ours = [run["engine"][mode]["median_events_per_s"] for run in results[name]]
            cells += [f"{statistics.median(ours):.0f}", _ratios(peer, ours, True)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def table_imports(results: dict[str, list[Any]]) -> list[str]:
    lines = ["| side | import | ms (median of the rounds) |", "| --- | --- | --- |"]
    for name, runs in results.items():
        for target, value in runs[0]["imports"].items():
            if isinstance(value, dict) and "import_ms_median" in value:
                ms = statistics.median(run["imports"][target]["import_ms_median"] for run in runs)
                lines.append(f"| {name} | {target} | {ms:.1f} |")
    return lines


def table_rt(results: dict[str, list[Any]]) -> list[str]:
    lines = ["| side | plugins | lock | record | round trips (client / MONITOR) | commands |"]
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for name, runs in results.items():
        for row in runs[0]:
            trips = f"{row['round_trips_client']} / {row.get('round_trips_monitor', '-')}"
            commands = " ".join(row["commands_client"])
            lines.append(
                f"| {name} | {row['plugins']} | {row['lock']} | {row['record']} | {trips} "
                f"| {commands} |"
            )
    return lines


TABLES = {
    "persisted": table_persisted,
    "engine": table_engine,
    "imports": table_imports,
    "rt": table_rt,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["setup", *TABLES])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--adapters", help="classes of bench/xsm_adapter.py, comma separated")
    ap.add_argument("--peer-venv", type=Path, default=PEER_VENV)
    ap.add_argument("--python", default=sys.executable, help="creates the peer's virtualenv")
    ap.add_argument("--out", type=Path, help="default: bench/results/peer/<UTC stamp>/")
    a = ap.parse_args(argv)
    if a.what == "setup" or not peer_python(a.peer_venv).exists():
        cmd_setup(a.peer_venv, a.python)
        if a.what == "setup":
            return 0
    default = "Adapter" if a.what in ("engine", "imports") else "Adapter,AdapterKeyAtOpen"
    adapters = [n for n in (a.adapters or default).split(",") if n]
    out = a.out or ROOT / "bench" / "results" / "peer" / time.strftime(
        "%Y%m%dT%H%M%SZ", time.gmtime()
    )
    out.mkdir(parents=True, exist_ok=True)
    # cold imports as an installed package would see them (byte-compiled once)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "django_xsm")], check=True)
    results = run_rounds(a.what, a.peer_venv, adapters, a.rounds, extra, out)
    table = TABLES[a.what](results)
    header = (
        f"{a.what}, {a.rounds} rounds, harness arguments: {' '.join(extra) or '(none)'}, "
        f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    text = "\n".join([header, "", *table]) + "\n"
    (out / "table.md").write_text(text, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(text)
    print(f"raw output: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
