"""Record XState's results for the hand-written reference cases.

    python -m tests.engine.reference.record

``recorded.json`` holds each case (``name``, ``about``, ``machine``,
``steps``, optionally ``max_microsteps`` and ``difference``) with
``xstate``: XState 5.33.3's step results, computed by
``xstate_cases.mjs``. A case whose ``difference`` names a documented
difference also keeps ``engine``: the engine's step results, which
tests/engine/test_xstate_reference.py pins. Recording refuses a case that
does not behave as it says: one without ``difference`` must agree with
XState on every step; one with it must disagree, and
:func:`~.differences.classify` must name that difference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .cases import EngineRun, compare, differing_field
from .differences import Facts, classify
from .node import missing, run_xstate

RECORDED = Path(__file__).parent / "recorded.json"
DEFINITION = ("name", "about", "machine", "steps", "max_microsteps", "difference")


def load() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(RECORDED.read_text(encoding="utf-8"))
    return cases


def definition(case: dict[str, Any]) -> dict[str, Any]:
    """The case without its recorded results (what the node script runs)."""
    return {k: case[k] for k in DEFINITION if k in case}


def verdict(case: dict[str, Any], xstate: list[dict[str, Any]]) -> tuple[Any, list[Any]]:
    """``(None | difference name | (step, field), engine steps)``; the
    predicates look at the run as it is on the differing step."""
    run = EngineRun(case)
    steps = run.steps()
    engine: list[dict[str, Any]] = []
    for index, ours in enumerate(steps):
        engine.append(ours)
        field = differing_field(ours, xstate[index]) if index < len(xstate) else "steps"
        if field is not None:
            named = classify(Facts(run, ours, xstate[index])) if field != "steps" else None
            return (named or (index, field)), [*engine, *steps]
    return compare(engine, xstate), engine


def record() -> list[str]:
    """Re-record every case; returns the problems (nothing written then)."""
    cases = load()
    results = run_xstate([definition(c) for c in cases])
    problems = []
    out = []
    for case, result in zip(cases, results, strict=True):
        if "error" in result:
            problems.append(f"{case['name']}: XState refused it: {result['error']}")
            continue
        found, engine = verdict(case, result["steps"])
        expected = case.get("difference")
        if found != expected:
            problems.append(f"{case['name']}: expected {expected!r}, found {found!r}")
        entry = {**definition(case), "xstate": result["steps"]}
        if expected is not None:
            entry["engine"] = engine
        out.append(entry)
    if not problems:
        RECORDED.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return problems


def main() -> int:
    reason = missing()
    if reason is not None:
        print(f"cannot record: {reason}", file=sys.stderr)
        return 2
    problems = record()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
