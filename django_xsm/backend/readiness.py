"""Whether the ``XSM`` settings name a usable connection, answered once:
the backend refuses to build on the first problem (``ImproperlyConfigured``)
and ``manage.py check`` reports each under its id (docs/settings.md, System
checks), with the same words. None of that touches the network, and no
message echoes any part of the URL (it may carry a password).

The end of this module asks the server itself, for ``check --deploy`` and
``manage.py xsm_namespace`` (a command or two each, bounded by the socket
timeout): a plain client on a cluster node (``xsm.E012``), the buckets'
spread over the cluster's masters (``xsm.W013``, addresses as
``host:port``, never credentials), and stored instances this code cannot
load (``xsm.E015``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from django_xsm.brief import brief_error
from django_xsm.conf import XsmSettings
from django_xsm.engine import Machine
from django_xsm.exceptions import MigrationError, StoreError, StoreUnavailableError, XsmError
from django_xsm.persistence.arguments import validate_prefix
from django_xsm.redis import DEFAULT_BUCKETS, KeyLayout, memory

from .clients import is_cluster

__all__ = [
    "BUCKETS_PER_MASTER",
    "CHANGE_SAMPLE",
    "ChangedMachine",
    "ConnectionProblem",
    "NamespaceInfo",
    "bucket_problem",
    "cache_alias_problem",
    "changed_machines",
    "cluster_node_problem",
    "connection_problems",
    "namespace_info",
    "require_usable",
]

_SCHEMES = ("redis", "rediss", "unix")
_CLUSTER_SCHEMES = ("redis", "rediss")


@dataclass(frozen=True, slots=True)
class ConnectionProblem:
    """One reason the settings cannot give a working store: the check
    ``id``, the ``message`` and how to fix it (``hint``, may be empty)."""

    id: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


def _prefix(s: XsmSettings) -> Iterator[ConnectionProblem]:
    if s.prefix is None:
        yield ConnectionProblem(
            "xsm.E002",
            "XSM['PREFIX'] is not set",
            "set a namespace for this application's keys, e.g. XSM = {'PREFIX': 'shop'}",
        )
        return
    try:
        validate_prefix(s.prefix)
    except ValueError as exc:
        yield ConnectionProblem("xsm.E002", f"XSM['PREFIX'] is invalid: {exc}")


def _url_is_usable(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a bad port)
    except ValueError:
        return False
    return parts.scheme in _SCHEMES


def _cluster_url_problem(url: str) -> ConnectionProblem | None:
    """A Redis Cluster has no databases but 0 and no unix sockets."""
    parts = urlsplit(url)  # _url_is_usable accepted it
    db = parts.path.strip("/") or "0"
    if parts.scheme in _CLUSTER_SCHEMES and db == "0" and "db=" not in parts.query:
        return None
    return ConnectionProblem(
        "xsm.E004",
        "XSM['REDIS_URL'] cannot seed a Redis Cluster client: it must be redis:// or "
        "rediss:// to a node, on database 0",
        "a cluster has database 0 only and no unix sockets, e.g. redis://10.0.0.5:7000/0",
    )


def _sources(s: XsmSettings) -> Iterator[ConnectionProblem]:
    sources = {"REDIS_URL": s.redis_url, "CACHE_ALIAS": s.cache_alias, "SENTINEL": s.sentinel}
    given = [name for name, value in sources.items() if value]
    if len(given) < 2:
        return
    listed = (
        f"both {given[0]} and {given[1]}"
        if len(given) == 2
        else "REDIS_URL, CACHE_ALIAS and SENTINEL"
    )
    yield ConnectionProblem(
        "xsm.E003",
        f"XSM sets {listed}",
        "keep one: REDIS_URL for a dedicated client (REDIS_CLUSTER for a cluster), "
        "CACHE_ALIAS to share a django-redis pool, SENTINEL for a Sentinel-managed primary",
    )


def _embedded(s: XsmSettings) -> Iterator[ConnectionProblem]:
    if not s.uses_embedded:
        yield ConnectionProblem(
            "xsm.E008",
            "XSM has no Redis configured and DEBUG is off",
            "set XSM['REDIS_URL'] (or CACHE_ALIAS, or SENTINEL); the in-process fakeredis "
            "default keeps state in one process only and runs only with DEBUG=True "
            "(or XSM['EMBEDDED']=True, e.g. in tests)",
        )
        return
    missing = memory.missing_packages()
    if missing:
        yield ConnectionProblem(
            "xsm.E009",
            f"The embedded XSM store needs {' and '.join(missing)}",
            "pip install 'django-xsm[embedded]', or set XSM['REDIS_URL']",
        )


def cache_alias_problem(alias: str) -> str | None:
    """Why ``alias`` cannot serve as the XSM connection, or None when it can
    (used by the system checks; touches no network)."""
    from django.conf import settings

    caches = getattr(settings, "CACHES", {}) or {}
    if alias not in caches:
        known = ", ".join(sorted(caches)) or "none"
        return f"there is no cache {alias!r} in CACHES (defined: {known})"
    backend = str(caches[alias].get("BACKEND", ""))
    if not backend.startswith("django_redis."):
        return (
            f"cache {alias!r} uses {backend or 'no BACKEND'}, not django-redis; "
            "XSM needs a Redis server (use django_redis.cache.RedisCache or REDIS_URL)"
        )
    client_class = str((caches[alias].get("OPTIONS") or {}).get("CLIENT_CLASS", ""))
    if "Shard" in client_class:
        return (
            f"cache {alias!r} is sharded ({client_class}); XSM commits one instance "
            "in one script on one server, so it needs an unsharded alias or REDIS_URL"
        )
    try:
        import django_redis  # noqa: F401
    except ImportError:
        return "django-redis is not installed (pip install django-xsm[django-redis])"
    return None


def connection_problems(s: XsmSettings) -> list[ConnectionProblem]:
    """Every reason ``s`` cannot give a working store, in check-id order."""
    out = [*_prefix(s), *_sources(s)]
    if s.redis_url and not _url_is_usable(s.redis_url):
        out.append(
            ConnectionProblem(
                "xsm.E004",
                "XSM['REDIS_URL'] is not a usable redis://, rediss:// or unix:// URL",
                "use redis://host:6379/0, rediss://host:6380/0 (TLS) or unix:///path/redis.sock",
            )
        )
    elif s.redis_url and s.redis_cluster:
        seed = _cluster_url_problem(s.redis_url)
        if seed is not None:
            out.append(seed)
    if s.cache_alias:
        problem = cache_alias_problem(s.cache_alias)
        if problem is not None:
            unknown = problem.startswith("there is no cache")
            out.append(
                ConnectionProblem(
                    "xsm.E005" if unknown else "xsm.E006", f"XSM['CACHE_ALIAS']: {problem}"
                )
            )
    if not s.has_server:
        out.extend(_embedded(s))
    return out


def require_usable(s: XsmSettings) -> None:
    """Raise ``ImproperlyConfigured`` with the first connection problem."""
    problems = connection_problems(s)
    if problems:
        raise ImproperlyConfigured(str(problems[0]))


# --- what the server says (check --deploy, xsm_namespace) ----------------------------

#: ``xsm.W013``: a namespace on a cluster should have at least this many
#: buckets per master. Each bucket is one hash slot, so with fewer the
#: masters hold very different shares of the instances (16 buckets on 3
#: masters: 5, 5 and 6 at best, often far worse) and adding a master moves
#: a large share at once.
BUCKETS_PER_MASTER = 8


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    """A namespace as its schema marker and the cluster's slot map show it.

    ``exists`` is False for a namespace not created yet; ``buckets`` is
    then the count it will be created with. ``masters`` and ``spread``
    (master ``host:port`` -> how many buckets it holds) are empty off a
    cluster.
    """

    prefix: str
    exists: bool
    buckets: int
    layout: int | None = None
    namespace_id: str = ""
    masters: tuple[str, ...] = ()
    spread: Mapping[str, int] = field(default_factory=dict)

    @property
    def cluster(self) -> bool:
        return bool(self.masters)


@contextlib.contextmanager
def _asking() -> Iterator[None]:
    """redis-py errors as StoreUnavailableError, named by class only (their
    text holds host:port)."""
    from redis.exceptions import RedisClusterException, RedisError

    try:
        yield
    except (RedisError, RedisClusterException, OSError) as exc:
        reason = type(exc).__name__
        raise StoreUnavailableError(f"Redis did not answer ({reason})", cause=reason) from exc


def _number(raw: Any) -> int:
    return int(raw.decode() if isinstance(raw, bytes) else raw)


def namespace_info(client: Any, prefix: str, wanted_buckets: int | None) -> NamespaceInfo:
    """Read ``prefix``'s schema marker (without creating it) and, on a
    cluster, which master holds each bucket. One ``HMGET``, plus the slot
    map the cluster client already has. Raises ``StoreUnavailableError``
    when Redis does not answer and ``StoreError`` for an unreadable marker."""
    with _asking():
        layout, buckets, namespace_id = client.hmget(
            KeyLayout.schema_key_for(prefix), "layout", "buckets", "id"
        )
    exists = buckets is not None
    try:
        count = _number(buckets) if exists else (wanted_buckets or DEFAULT_BUCKETS)
        version = _number(layout) if layout is not None else None
        keys = KeyLayout(prefix, count)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"The schema marker of namespace {prefix!r} is unreadable",
            hint=f"inspect the hash {KeyLayout.schema_key_for(prefix)!r}; something else "
            "may use this prefix",
        ) from exc
    ident = namespace_id.decode() if isinstance(namespace_id, bytes) else namespace_id or ""
    if not is_cluster(client):
        return NamespaceInfo(prefix, exists, count, version, ident)
    with _asking():
        masters = tuple(sorted(node.name for node in client.get_primaries()))
        spread = dict.fromkeys(masters, 0)
        for bucket in range(count):
            owner = client.get_node_from_key(keys.tag(bucket)).name
            spread[owner] = spread.get(owner, 0) + 1
    return NamespaceInfo(prefix, exists, count, version, ident, masters, spread)


def cluster_node_problem(s: XsmSettings, client: Any) -> ConnectionProblem | None:
    """``xsm.E012``: a plain client talks to a cluster node (``INFO
    cluster`` says ``cluster_enabled:1``). Every key another node owns
    would fail with ``MOVED``. None when the server does not answer or has
    no cluster section (the readiness probe reports outages)."""
    if is_cluster(client):
        return None
    try:
        with _asking():
            section = client.info("cluster")
    except StoreUnavailableError:
        return None
    if str(section.get("cluster_enabled", "")) != "1":
        return None
    if s.cache_alias:
        return ConnectionProblem(
            "xsm.E012",
            f"This Redis is a cluster node: cache {s.cache_alias!r} must have a cluster client",
            "set 'CONNECTION_FACTORY': 'django_xsm.backend.clients.ClusterConnectionFactory' "
            "in the cache's OPTIONS (docs/django.md); a plain client reaches one node, and "
            "every key another node owns fails with MOVED",
        )
    return ConnectionProblem(
        "xsm.E012",
        "This Redis is a cluster node: set XSM['REDIS_CLUSTER'] = True",
        "a plain client reaches one node, and every key another node owns fails with MOVED",
    )


def bucket_problem(info: NamespaceInfo) -> ConnectionProblem | None:
    """``xsm.W013``: fewer than :data:`BUCKETS_PER_MASTER` buckets per
    master of the cluster."""
    wanted = BUCKETS_PER_MASTER * len(info.masters)
    if not info.cluster or info.buckets >= wanted:
        return None
    held = ", ".join(f"{n}" for n in sorted(info.spread.values(), reverse=True))
    what = "has" if info.exists else "will be created with"
    fix = (
        f"its bucket count is fixed: create a new namespace with `manage.py xsm_namespace "
        f"--create --buckets {wanted}` under a new XSM['PREFIX'] (and set XSM['BUCKETS'] "
        f"= {wanted})"
        if info.exists
        else f"set XSM['BUCKETS'] = {wanted} before the namespace is created, or create it "
        f"now with `manage.py xsm_namespace --create --buckets {wanted}`"
    )
    return ConnectionProblem(
        "xsm.W013",
        f"Namespace {info.prefix!r} {what} {info.buckets} buckets for {len(info.masters)} "
        f"cluster masters (they hold {held}): each bucket is one hash slot, so the masters' "
        f"shares of the instances differ by whole buckets; at least {BUCKETS_PER_MASTER} "
        f"per master ({wanted}) even them out",
        fix,
    )


#: How many stored instances of each machine :func:`changed_machines` reads.
CHANGE_SAMPLE = 10


@dataclass(frozen=True, slots=True)
class ChangedMachine:
    """Stored instances of ``machine_id`` that this code cannot load:
    ``failed`` of the ``sampled`` ones, e.g. ``key``, for ``reason`` (the
    ``MigrationError``'s message; ``hint`` says what to do)."""

    machine_id: str
    version: str
    sampled: int
    failed: int
    key: str
    reason: str
    hint: str


def changed_machines(
    store: Any, machines: Iterable[Machine], *, sample: int = CHANGE_SAMPLE
) -> list[ChangedMachine]:
    """The machines some of whose stored instances this code cannot load
    (``xsm.E015``). Per machine, at most ``sample`` instances, the first in
    key order, are read and restored exactly as a request would (nothing is
    written), so a ``MigrationError`` here is one there. Raises
    ``StoreUnavailableError`` when Redis does not answer."""
    out: list[ChangedMachine] = []
    for machine in {m.id: m for m in machines}.values():
        keys, _ = store.list_page(machine=machine.id, limit=sample)
        sampled, failed = 0, []
        for key in keys:
            try:
                record = store.load(key)
            except StoreUnavailableError:
                raise
            except XsmError:
                continue  # unreadable (corrupt, oversized): not a chart change
            if record is None:
                continue  # erased since the listing
            sampled += 1
            try:
                machine.restore(record.snapshot)
            except MigrationError as exc:
                failed.append((key, exc.message, exc.hint))
            except XsmError:
                continue  # a corrupt snapshot: not a chart change
            except Exception as exc:  # a migration of the user's that raises
                reason = f"a migration of {machine.id!r} raised {brief_error(exc)}"
                failed.append((key, reason, "fix the migration so it returns the snapshot"))
        if failed:
            key, reason, hint = failed[0]
            out.append(
                ChangedMachine(machine.id, machine.version, sampled, len(failed), key, reason, hint)
            )
    return out
