"""Alternating (ABBA) rounds of ``bench/floor.py`` or the persisted micro
benchmark over source trees and reply parsers, for before/after figures on
a noisy machine.

Each configuration is ``<tree>/<parser>``: ``tree`` names a directory given
with ``--tree NAME=PATH`` (a checkout or a ``git archive`` of a commit; its
own ``django_xsm`` is imported), ``parser`` is ``plain`` or ``hiredis``
(``hiredis`` puts ``--hiredis-path``, a ``pip install --target`` directory,
on ``PYTHONPATH``). Odd rounds run the configurations in reverse order.
Prints one JSON row per run, then the medians.

Usage (from the repository root; ``../xsm-base`` made with ``git worktree
add ../xsm-base <commit>``, ``.venv-hiredis`` with ``pip install --target
.venv-hiredis hiredis``)::

    python bench/abba.py --tree base=../xsm-base --tree head=. --hiredis-path .venv-hiredis \\
        --configs base/hiredis,head/hiredis --rounds 10 floor
    python bench/abba.py --tree head=. --hiredis-path .venv-hiredis \\
        --configs head/plain,head/hiredis --rounds 4 persisted
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HARNESS = Path(__file__).resolve().parent / "peer" / "harness.py"


def floor_row(cwd: str, env: dict[str, str], number: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "bench/floor.py", "--number", str(number)],
        cwd=cwd, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip

    def grab(pattern: str) -> float:
        found = re.search(pattern, out)
        assert found, (pattern, out)
        return float(found.group(1))

    return {
        "gets_wall": grab(r"two GETs\s+(\d+) µs wall"),
        "gets_cpu": grab(r"two GETs\s+\d+ µs wall\s+(\d+)"),
        "req_wall": grab(r"keyed request\s+(\d+) µs wall"),
        "req_cpu": grab(r"keyed request\s+\d+ µs wall\s+(\d+)"),
        "server_us": grab(r"server per script\s+([\d.]+)"),
        "inner": grab(r"inside the scripts\s+([\d.]+)"),
    }


def persisted_row(cwd: str, env: dict[str, str], sends: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        subprocess.run(
            [sys.executable, str(HARNESS), "--persisted", "--start-redis", "--no-fakeredis",
             "--locks", "optimistic", "--sends", str(sends),
             "--adapter", "bench.xsm_adapter:AdapterKeyAtOpen", "--json", path],
            cwd=cwd, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    row: dict[str, Any] = {}
    for x in data["persisted"]:
        row[x["plugins"] + "_median_us"] = x["median_us"]
        row[x["plugins"] + "_cpu_us"] = x["client_cpu_us_per_send"]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["floor", "persisted"])
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--configs", required=True, help="comma list of tree/parser")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--number", type=int, default=1000, help="floor.py --number")
    ap.add_argument("--sends", type=int, default=1500, help="harness --sends")
    ap.add_argument("--hiredis-path", help="a pip install --target directory holding hiredis")
    a = ap.parse_args(argv)
    trees = dict(t.split("=", 1) for t in a.tree)
    order = [tuple(c.split("/")) for c in a.configs.split(",")]
    if any(parser == "hiredis" for _, parser in order) and not a.hiredis_path:
        ap.error("a hiredis configuration needs --hiredis-path (pip install --target DIR hiredis)")
    rows = []
    for r in range(a.rounds):
        for tree, parser in order if r % 2 == 0 else order[::-1]:
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XSM_REDIS_URL")}
            if parser == "hiredis":
                env["PYTHONPATH"] = os.path.abspath(a.hiredis_path)
            cwd = os.path.abspath(trees[tree])
            if a.what == "floor":
                row = floor_row(cwd, env, a.number)
            else:
                row = persisted_row(cwd, env, a.sends)
            row = {"tree": tree, "parser": parser, "round": r, **row}
            row["t"] = time.strftime("%H:%M:%S", time.gmtime())
            print(json.dumps(row), flush=True)
            rows.append(row)
    fields = [k for k in rows[0] if k not in ("tree", "parser", "round", "t")]
    medians = {
        f"{tree}/{parser}": {
            k: round(
                statistics.median(x[k] for x in rows if (x["tree"], x["parser"]) == (tree, parser)),
                1,
            )
            for k in fields
        }
        for tree, parser in order
    }
    print(json.dumps({"medians": medians}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
