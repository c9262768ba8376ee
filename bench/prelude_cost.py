"""What the Lua preludes cost per script call, and what a function library saves.

Every ``EVALSHA`` runs its whole script chunk, so each ``local function`` of
the shared preludes is made again on every call before the first command.
A Redis 7 function library (``FUNCTION LOAD``) defines them once. On a
throw-away redis-server (free loopback port, stopped by pid), this times,
as ``INFO commandstats`` µs per call (best of 3 runs of ``--number`` calls):

- ``EVALSHA`` of ``return 1`` (the floor of a script call);
- ``EVALSHA`` of ``COMMIT``'s and ``OPEN``'s preludes followed by ``return 1``;
- ``FCALL`` of a function registered after the same ``COMMIT`` preludes in a
  library (defined once, at ``FUNCTION LOAD``).

Usage::

    .venv/bin/python bench/prelude_cost.py [--number 3000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _best_usec(client: Any, command: str, call: Any, number: int) -> float:
    best = float("inf")
    for _ in range(3):
        client.config_resetstat()
        for _ in range(number):
            call()
        best = min(best, float(client.info("commandstats")[f"cmdstat_{command}"]["usec_per_call"]))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=3000)
    number = parser.parse_args().number
    import redis

    from bench.model_field import redis_server
    from django_xsm.redis.scripts import records

    commit_prelude = records.COMMIT[: records.COMMIT.index("local a = cjson.decode")]
    open_prelude = records.OPEN[: records.OPEN.index("local n = tonumber(ARGV[4])")]
    # a library's load runs with no global unpack: the prelude's fallback
    # line reads it, so it is left out here (the probe calls nothing)
    library = (
        "#!lua name=xsm_prelude_probe\n"
        + commit_prelude.replace("local unpack = unpack or table.unpack", "")
        + "\nredis.register_function('xsm_probe', function(keys, args) return 1 end)\n"
    )
    with redis_server() as url:
        client = redis.Redis.from_url(url)
        rows = []
        for name, source in (
            ("EVALSHA return 1", "return 1"),
            ("EVALSHA COMMIT preludes + return 1", commit_prelude + "\nreturn 1"),
            ("EVALSHA OPEN preludes + return 1", open_prelude + "\nreturn 1"),
        ):
            sha = client.script_load(source)
            rows.append(
                (name, _best_usec(client, "evalsha", lambda s=sha: client.evalsha(s, 0), number))
            )
        client.function_load(library, replace=True)
        rows.append(
            (
                "FCALL after the COMMIT preludes (loaded once)",
                _best_usec(client, "fcall", lambda: client.fcall("xsm_probe", 0), number),
            )
        )
    for name, usec in rows:
        print(f"{name:48s} {usec:6.1f} µs per call")


if __name__ == "__main__":
    main()
