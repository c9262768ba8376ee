"""Re-encryption on the Redis layer: undelivered outbox entries move to the
newest key in order, entries a worker holds are left for the next run, and
a value that changed between the read and the rewrite is never overwritten."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet

from django_xsm.persistence import FernetCodec
from django_xsm.persistence.outbox import Emitted
from django_xsm.persistence.sealing import SEALED
from django_xsm.redis import RedisOutbox, RedisStore, Reencryptor
from django_xsm.redis.calls import Call
from tests.support import Backends, entry, snap, unit


def _emit(b: Backends, key: str, n: int) -> None:
    b.store.commit(
        unit(
            key,
            0,
            snap(),
            emitted=tuple(Emitted(f"d{key}-{i}", {"type": "e", "n": i}) for i in range(n)),
        )
    )


def _sealed_tokens(client: Any, name: str) -> list[bytes]:
    return [v for _, f in client.xrange(name) for v in f.values() if v.startswith(SEALED.encode())]


def dump(client: Any, prefix: str) -> dict[bytes, Any]:
    return {n: client.dump(n) for n in client.scan_iter(match="{" + prefix + "*")}


def test_undelivered_entries_move_in_order_and_held_ones_wait(make: Any) -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    b = make(codec=FernetCodec([old]), buckets=1)
    _emit(b, "o:1", 4)
    outbox = RedisOutbox(b.client, prefix=b.store.prefix, codec=FernetCodec([old]))
    (held,) = outbox.take("w", count=1)  # a worker holds the first entry
    rotated = FernetCodec([new, old])
    walker = Reencryptor(b.client, prefix=b.store.prefix, codec=rotated)
    steps = list(walker.run(batch=1000))
    assert sum(s.values for s in steps) == 4  # 3 events + the snapshot
    assert sum(s.busy for s in steps) == 1  # the held entry
    stream = b.store.layout.outbox(0)
    tokens = _sealed_tokens(b.client, stream)
    assert [rotated.is_current(t[len(SEALED) :].decode()) for t in tokens] == [
        False,
        True,
        True,
        True,
    ]
    reader = RedisOutbox(b.client, prefix=b.store.prefix, codec=FernetCodec([new, old]))
    assert outbox.ack(held)
    leases = reader.take("w", count=10)
    assert [lease.entry.event["n"] for lease in leases] == [1, 2, 3]  # commit order kept
    assert list(walker.run())[-1].busy == 0


def test_a_value_that_changed_since_it_was_read_is_not_overwritten(make: Any) -> None:
    b = make(codec=FernetCodec([Fernet.generate_key()]), buckets=1)
    _emit(b, "o:1", 1)
    name = b.store.layout.snapshot("o:1")
    b.client.hset(name, "x", "now")
    run = b.store.driver.run

    def send(call: Call) -> Any:
        def op() -> Any:
            return (yield call)

        return run(op())

    assert int(send(Call("HASH_CAS", [name], ["x", "before", "after"]))) == 0
    assert b.client.hget(name, "x") == b"now"
    assert int(send(Call("HASH_CAS", [name], ["x", "now", "after"]))) == 1
    assert b.client.hget(name, "x") == b"after"
    stream = b.store.layout.outbox(0)
    ((sid, fields),) = b.client.xrange(stream)
    e = fields[b"e"]
    reply = send(Call("STREAM_REWRITE", [stream], ["tail", "xsm", sid, "e", e + b"!", "new"]))
    assert [int(x) for x in reply] == [0, 1, 0]
    assert b.client.xrange(stream) == [(sid, fields)]  # nothing written
    reply = send(Call("STREAM_REWRITE", [stream], ["tail", "xsm", sid, "e", e, "new"]))
    assert [int(x) for x in reply] == [1, 0, 0]
    ((_, moved),) = b.client.xrange(stream)
    assert moved[b"e"] == b"new" and moved[b"id"] == fields[b"id"]


def test_values_in_clear_are_counted_and_left_alone(make: Any) -> None:
    """Data written before a codec was on: nothing to rewrite, and every
    value in clear counted from the same reads (a snapshot, two outbox
    events, a log record's payload and actor; its empty reason is not)."""
    b = make(buckets=1)
    b.store.commit(
        unit(
            "o:1",
            0,
            snap(),
            log_entries=(entry(),),
            emitted=tuple(Emitted(f"d-{i}", {"type": "e", "n": i}) for i in range(2)),
        )
    )
    codec = FernetCodec([Fernet.generate_key()])
    walker = Reencryptor(b.client, prefix=b.store.prefix, codec=codec)
    steps = list(walker.run(dry_run=True))
    assert (sum(s.values for s in steps), sum(s.clear for s in steps)) == (0, 5)
    before = dump(b.client, b.store.prefix)
    steps = list(walker.run())
    assert (sum(s.values for s in steps), sum(s.clear for s in steps)) == (0, 5)
    assert dump(b.client, b.store.prefix) == before  # nothing encrypted
    # written under the codec from then on: sealed, not counted
    sealing = RedisStore(b.client, prefix=b.store.prefix, buckets=1, codec=codec)
    sealing.commit(unit("o:2", 0, snap(), log_entries=(entry(),)))
    assert sum(s.clear for s in walker.run(dry_run=True)) == 5
