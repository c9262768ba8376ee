"""Where do an instance's Redis bytes go?

Starts a throw-away ``redis-server`` on a free loopback port (stopped at
exit), fills one namespace with N instances through the real COMMIT script
(``bench/scale.py``'s fill: the order chart, every instance with a
deadline), then reports ``used_memory`` per instance and, structure by
structure, what deleting it frees (the per-bucket index keys, the version
floors, the snapshot hashes), plus ``MEMORY USAGE`` and the encoding of one
snapshot hash and of each index key of bucket 0.

Usage::

    python bench/memory.py --instances 100000 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import redis
from scale import fill

from bench.peer.harness import redis_server
from django_xsm.redis import RedisStore
from django_xsm.redis.keys import KeyLayout


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def measure(n: int) -> dict[str, Any]:
    with redis_server() as url:
        client = redis.Redis.from_url(url)
        base = used(client)
        store = RedisStore(client, prefix="scale")
        fill(store, n, min(100, n), int(time.time() * 1000))
        layout: KeyLayout = store.core.state.layout
        total = used(client) - base
        row: dict[str, Any] = {
            "instances": n,
            "buckets": layout.buckets,
            "bytes_per_instance": round(total / n, 1),
            "redis_version": client.info("server")["redis_version"],
        }
        sample = layout.snapshot("order:00000000")
        row["snapshot_hash"] = {
            "key": sample,
            "memory_usage": client.memory_usage(sample, samples=0),
            "encoding": client.object("encoding", sample).decode(),
            "fields": {k.decode(): len(v) for k, v in client.hgetall(sample).items()},
        }
        per_key: dict[str, Any] = {}
        for name in client.scan_iter(match=layout.tag(0) + ":*", count=1000):
            if name.startswith((layout.tag(0) + ":s:").encode()):
                continue
            per_key[name.decode()] = {
                "type": client.type(name).decode(),
                "encoding": client.object("encoding", name).decode(),
                "memory_usage": client.memory_usage(name, samples=0),
            }
        row["bucket0_keys"] = per_key
        freed: dict[str, float] = {}
        structures = {
            "ix": layout.index_info,
            "idx": layout.keys_index,
            "midx": layout.machine_index,
            "sidx": layout.state_index,
            "due": layout.due,
            "ver": layout.floors,
        }
        for label, name_of in structures.items():
            names = [name_of(b) for b in range(layout.buckets)]
            if not client.exists(*names):
                freed[label] = 0.0
                continue
            before = used(client)
            client.delete(*names)
            freed[label] = round((before - used(client)) / n, 1)
        before = used(client)
        pipe = client.pipeline(transaction=False)
        for i in range(n):
            pipe.delete(layout.snapshot(f"order:{i:08d}"))
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()
        freed["snapshot_keys"] = round((before - used(client)) / n, 1)
        freed["rest"] = round(total / n - sum(freed.values()), 1)
        row["freed_per_instance"] = freed
        return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=100_000)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    row = measure(a.instances)
    print(json.dumps(row, indent=2), flush=True)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(row, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
