"""Merge ``run.py bench`` summaries into one table: per (stack, workload),
the median of the quiet runs (other work below ``--max-other`` CPU seconds),
else of all runs (then marked ``noisy``).

    python3 bench/http/report.py bench/results/http/A/summary.json bench/results/http/B/summary.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("summaries", nargs="+")
    ap.add_argument("--max-other", type=float, default=3.0)
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    for path in a.summaries:
        with open(path) as summary:
            rows += json.load(summary)["rows"]
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["stack"], r["workload"]), []).append(r)
    print(
        "| stack | workload | runs (quiet) | req/s | p50 ms | p99 ms | non-2xx per run "
        "| duplicates | lost | server CPU µs/req | store CPU µs/req | wrk µs/req "
        "| CPU-bound ceiling req/s |"
    )
    print(
        "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    order = [
        "xsm",
        "xsm-async",
        "xsm-async-lean",
        "xsm-pessimistic",
        "fsm",
        "fsm-async-commit",
        "peer",
    ]
    for (stack, workload), rs in sorted(
        by.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else 99, kv[0][1])
    ):
        quiet = [r for r in rs if r["other_cpu_s"] <= a.max_other]
        use = quiet or rs

        def med(f: Any, use: list[dict[str, Any]] = use) -> float:
            return float(statistics.median(f(r) for r in use))

        def store(r: dict[str, Any]) -> float:
            return sum(v for g, v in r["cpu_us_per_request"].items() if g not in ("server", "wrk"))

        def total(r: dict[str, Any]) -> float:
            return sum(r["cpu_us_per_request"].values())

        non2 = ", ".join(
            str(r["non_2xx"])
            + (f" ({'; '.join(f'{k}' for k in r['problems'])})" if r["problems"] else "")
            for r in use
        )
        print(
            f"| {stack} | {workload} | {len(rs)} ({len(quiet)}){'' if quiet else ' noisy'} "
            f"| {med(lambda r: r['rps']):,.0f} | {med(lambda r: r['latency_ms']['50']):.2f} "
            f"| {med(lambda r: r['latency_ms']['99']):.1f} | {non2} "
            f"| {sum(r['duplicates'] for r in rs)} | {sum(r['2xx_without_log'] for r in rs)} "
            f"| {med(lambda r: r['cpu_us_per_request']['server']):,.0f} | {med(store):,.0f} "
            f"| {med(lambda r: r['cpu_us_per_request']['wrk']):,.0f} "
            f"| {med(lambda r: 2e6 / total(r)):,.0f} |"
        )


if __name__ == "__main__":
    main()
