"""What does ``check --deploy``'s ``xsm.E015`` question cost?

Per registered machine it lists the first ``CHANGE_SAMPLE`` (10) stored
instances (one pipelined ``LIST_PAGE`` call per bucket) and reads each
(one ``OPEN`` script): this measures, against one real Redis (a throw-away
``redis-server`` on a free loopback port, stopped by pid, or
``XSM_REDIS_URL``), the wall milliseconds of
``readiness.changed_machines()`` (median of ``--repeat`` runs) and its
Redis round trips, for ``--machines`` machines holding ``--instances``
instances each, every one stored by a chart that has since changed
without a version bump (so every sampled instance is restored and fails).

Usage::

    .venv/bin/python bench/deploy_check.py [--machines 5] [--instances 2000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _chart(machine_id: str, paid: str) -> dict[str, Any]:
    return {
        "id": machine_id,
        "initial": "cart",
        "states": {
            "cart": {"on": {"PAY": paid}},
            paid: {"after": {"86400000": "archived"}},
            "archived": {},
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=5)
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django.settings")
    import django

    django.setup()
    import redis

    from bench.model_field import redis_server
    from django_xsm.backend.readiness import CHANGE_SAMPLE, changed_machines
    from django_xsm.engine import create_machine
    from django_xsm.redis import RedisStore
    from tests.support import delete_namespace

    ids = [f"bench{i}" for i in range(args.machines)]
    old = [create_machine(_chart(m, "paid")) for m in ids]
    new = [create_machine(_chart(m, "settled")) for m in ids]
    with redis_server() as url:
        client = redis.Redis.from_url(url)
        prefix = f"xsmbench-{uuid.uuid4().hex[:8]}"
        store = RedisStore(client, prefix=prefix)
        try:
            for machine in old:
                pipe_start = time.perf_counter()
                for n in range(args.instances):
                    instance = machine.start()
                    instance.send("PAY")
                    store.save(f"{machine.id}:{n}", instance.snapshot(), expected_version=0)
                print(f"filled {machine.id}: {time.perf_counter() - pipe_start:.1f} s")
            sent = [0]
            real = redis.connection.AbstractConnection.send_packed_command

            def counting(self: Any, command: Any, check_health: bool = True) -> Any:
                sent[0] += 1
                return real(self, command, check_health)

            changed_machines(store, new)  # warm: scripts loaded, schema marker read
            redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
            found = changed_machines(store, new)
            redis.connection.AbstractConnection.send_packed_command = real  # type: ignore[method-assign]
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                changed_machines(store, new)
                times.append((time.perf_counter() - start) * 1000)
            assert len(found) == args.machines and all(f.failed == CHANGE_SAMPLE for f in found)
            print(
                f"{args.machines} machines x {args.instances} instances: "
                f"{sent[0]} round trips ({sent[0] / args.machines:g} per machine), "
                f"median {statistics.median(times):.2f} ms "
                f"({statistics.median(times) / args.machines:.2f} ms per machine), "
                f"min {min(times):.2f} ms, max {max(times):.2f} ms over {args.repeat} runs"
            )
        finally:
            delete_namespace(client, prefix)
            client.close()


if __name__ == "__main__":
    main()
