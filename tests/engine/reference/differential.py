"""The random differential: django_xsm.engine against XState 5.33.3.

    python -m tests.engine.reference.differential [--cases 3000] [--seed 0] [--show N]

Runs the seeded random cases of :mod:`.charts` (seeds ``seed`` to
``seed + cases - 1``) on both sides, compares every step (:mod:`.cases`)
and explains each disagreement by a documented difference
(:mod:`.differences`). Prints the counts; exits 1 when a disagreement is
unexplained (it prints the first few with their seeds), 2 when XState
cannot run (``CI=true``) and 0 after a clean skip without node elsewhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django_xsm.exceptions import InvalidConfigError

from .cases import Case, EngineRun, differing_field
from .charts import random_case
from .differences import DIFFERENCES, Facts, classify
from .node import in_ci, missing, start_xstate

BATCH = 250  # cases per node process


@dataclass
class Outcome:
    cases: int = 0
    agreed: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # charts a side refused
    explained: Counter[str] = field(default_factory=Counter)
    unexplained: list[dict[str, Any]] = field(default_factory=list)


def check(case: Case, xstate: dict[str, Any], outcome: Outcome) -> None:
    """Compare one case, step by step up to the first disagreement, and
    count it. An illegal configuration on the engine's side is always a
    failure."""
    outcome.cases += 1
    if "error" in xstate:
        outcome.refused["xstate: " + xstate["error"].split("\n")[0][:80]] += 1
        return
    try:
        run = EngineRun(case)
    except InvalidConfigError as exc:
        outcome.refused[f"engine: {exc.message[:80]}"] += 1
        return
    verdict = _verdict(run, xstate["steps"])
    if run.illegal is not None:
        outcome.unexplained.append({"case": case["name"], "illegal": run.illegal})
    elif verdict is None:
        outcome.agreed += 1
    elif isinstance(verdict, str):
        outcome.explained[verdict] += 1
    else:
        outcome.unexplained.append({"case": case["name"], "step": verdict[0], "field": verdict[1]})


def _verdict(run: EngineRun, theirs: list[dict[str, Any]]) -> str | tuple[int, str] | None:
    """``None`` (agreed), the documented difference of the first
    disagreement, or ``(step, field)`` of an unexplained one."""
    count = 0
    for index, ours in enumerate(run.steps()):
        count += 1
        if index >= len(theirs):
            return index, "steps"
        differs = differing_field(ours, theirs[index])
        if differs is not None:
            return classify(Facts(run, ours, theirs[index])) or (index, differs)
    return None if count == len(theirs) else (count, "steps")


def run(cases: int, seed: int) -> Outcome:
    """Check seeds ``seed`` .. ``seed + cases - 1``; node works on the next
    batch while this process compares the current one."""
    outcome = Outcome()
    starts = range(seed, seed + cases, BATCH)
    batches = [[random_case(s) for s in range(a, min(a + BATCH, seed + cases))] for a in starts]
    pending = start_xstate(batches[0]) if batches else None
    for index, batch in enumerate(batches):
        assert pending is not None
        results = pending()
        pending = start_xstate(batches[index + 1]) if index + 1 < len(batches) else None
        for case, result in zip(batch, results, strict=True):
            check(case, result, outcome)
    return outcome


def report(outcome: Outcome, seconds: float, show: int) -> str:
    lines = [
        f"cases: {outcome.cases} in {seconds:.1f} s",
        f"agreed on every step: {outcome.agreed}",
    ]
    lines += [f"refused by {why}: {n}" for why, n in sorted(outcome.refused.items())]
    lines += [f"documented difference {d.name}: {outcome.explained[d.name]}" for d in DIFFERENCES]
    lines.append(f"unexplained: {len(outcome.unexplained)}")
    lines += [json.dumps(u) for u in outcome.unexplained[:show]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=10, help="unexplained cases to print")
    args = parser.parse_args(argv)
    reason = missing()
    if reason is not None:
        if in_ci():
            print(f"CI=true but the XState reference cannot run: {reason}", file=sys.stderr)
            return 2
        print(f"skipped: {reason}")
        return 0
    started = time.monotonic()
    outcome = run(args.cases, args.seed)
    print(report(outcome, time.monotonic() - started, args.show))
    return 1 if outcome.unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
