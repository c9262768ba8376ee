"""System checks (``manage.py check``; ``--deploy`` adds the deploy ones).

Every check, with what it means and how to fix it: docs/settings.md
(System checks). E002-E006, E008 and E009 are the connection problems of
:mod:`django_xsm.backend.readiness`, which the backend refuses to build on.
The ``--deploy`` questions to the server (W012, E011, E012, W013, E015) are
asked only when it answers; an unreachable server is the readiness probe's
to report.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from django.apps import AppConfig, apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from django_xsm import backend, conf
from django_xsm.backend.clients import NotAClusterNode
from django_xsm.backend.readiness import (
    CHANGE_SAMPLE,
    bucket_problem,
    changed_machines,
    cluster_node_problem,
    connection_problems,
    namespace_info,
)
from django_xsm.exceptions import StoreAuthenticationError, XsmError
from django_xsm.outbox import handler_problems, unhandled_emits
from django_xsm.registry import machines

__all__ = ["check_deploy", "check_settings", "detect_request_timeout"]

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_GUNICORN_TIMEOUT = re.compile(r"(?:--timeout(?:=|\s+)|(?<!\S)-t\s*)(\d+)")


def detect_request_timeout(s: conf.XsmSettings) -> tuple[float, str] | None:
    """The request timeout in seconds and where it was found, or None:
    ``XSM['REQUEST_TIMEOUT_S']``, else ``--timeout`` in ``GUNICORN_CMD_ARGS``
    or ``UWSGI_HARAKIRI``."""
    if s.request_timeout_s is not None:
        return float(s.request_timeout_s), "XSM['REQUEST_TIMEOUT_S']"
    found = _GUNICORN_TIMEOUT.search(os.environ.get("GUNICORN_CMD_ARGS", ""))
    if found and int(found.group(1)) > 0:  # gunicorn: 0 disables the timeout
        return float(found.group(1)), "GUNICORN_CMD_ARGS --timeout"
    harakiri = os.environ.get("UWSGI_HARAKIRI", "")
    if harakiri.isdigit() and int(harakiri) > 0:
        return float(harakiri), "UWSGI_HARAKIRI"
    return None


def _connection(s: conf.XsmSettings) -> list[CheckMessage]:
    # The errors are the backend's own refusals: one routine, one wording.
    problems = connection_problems(s)
    out: list[CheckMessage] = [Error(p.message, hint=p.hint or None, id=p.id) for p in problems]
    alias_refused = any(p.id in ("xsm.E005", "xsm.E006") for p in problems)
    if s.cache_alias and not alias_refused:
        out.extend(_cache_timeouts(s.cache_alias))
    if not s.has_server and s.embedded and not s.debug:
        out.append(
            Warning(
                "XSM['EMBEDDED'] is True while DEBUG is off: state lives in this process only",
                hint="fine for tests; in production set XSM['REDIS_URL']",
                id="xsm.W004",
            )
        )
    return out


def _cache_timeouts(alias: str) -> list[CheckMessage]:
    found = settings.CACHES[alias].get("OPTIONS")
    options: Mapping[str, object] = found if isinstance(found, Mapping) else {}
    if options.get("SOCKET_TIMEOUT") and options.get("SOCKET_CONNECT_TIMEOUT"):
        return []
    return [
        Warning(
            f"Cache {alias!r} sets no SOCKET_TIMEOUT / SOCKET_CONNECT_TIMEOUT",
            hint="without them a request waits forever on an unreachable Redis; set both "
            "in the cache's OPTIONS (e.g. 5)",
            id="xsm.W005",
        )
    ]


def _callables(s: conf.XsmSettings) -> list[CheckMessage]:
    out: list[CheckMessage] = []
    for name, path in (
        ("XSM['ACTOR']", s.actor),
        ("XSM['IDEMPOTENCY']['PRINCIPAL']", s.idempotency.principal),
        ("XSM['CODEC']", s.codec),
        ("XSM['STREAM']['PERMISSION']", s.stream.permission),
    ):
        if path is None:
            continue
        try:
            found: Any = import_string(path)
        except (ImportError, ValueError, TypeError) as exc:
            # "." or "a..b" are not dotted paths at all (ValueError / TypeError)
            reason = str(exc).replace(path, "it") if len(path) > 200 else str(exc)
            out.append(
                Error(f"{name}: cannot import {path[:200]!r}: {reason[:300]}", id="xsm.E010")
            )
            continue
        if not callable(found) and not hasattr(found, "encode"):
            out.append(Error(f"{name}: {path!r} is not callable", id="xsm.E010"))
    return out


def _machines(s: conf.XsmSettings) -> list[CheckMessage]:
    if not s.machines:
        return [
            Warning(
                "XSM['MACHINES'] is empty",
                hint="register machines by name, e.g. {'order': 'orders.machines.order'}",
                id="xsm.W003",
            )
        ]
    return [
        *(
            Error(problem.text, hint=problem.hint or None, id="xsm.E007")
            for problem in machines.problems
        ),
        *_unknown_permissions(),
    ]


def _declared_permissions() -> set[str]:
    """Every ``"app_label.codename"`` the installed models declare: their
    ``default_permissions`` (add, change, delete, view) and
    ``Meta.permissions``, which Django creates after ``migrate``. Read from
    the models, without the database."""
    found: set[str] = set()
    for model in apps.get_models():
        meta = model._meta
        found.update(
            f"{meta.app_label}.{action}_{meta.model_name}" for action in meta.default_permissions
        )
        found.update(f"{meta.app_label}.{codename}" for codename, _ in meta.permissions)
    return found


def _unknown_permissions() -> list[CheckMessage]:
    """``xsm.W006``: a permission string of a machine's ``PERMISSIONS``
    that no installed model declares (only with ``django.contrib.auth``,
    whose backend is the one that reads such strings)."""
    if not apps.is_installed("django.contrib.auth"):
        return []
    known = _declared_permissions()
    labels = {config.label for config in apps.get_app_configs()}
    out: list[CheckMessage] = []
    for name, entry in machines.items():
        for event, rules in entry.permissions.items():
            for rule in rules:
                if not isinstance(rule, str) or rule in known:
                    continue
                app_label = rule.partition(".")[0]
                hint = (
                    f"no model of app {app_label!r} declares it in Meta.permissions"
                    if app_label in labels
                    else f"no installed app is labelled {app_label!r}"
                )
                out.append(
                    Warning(
                        f"XSM['MACHINES'][{name!r}] PERMISSIONS[{event!r}]: {rule!r} names "
                        "no permission an installed model declares, so only superusers "
                        "pass it",
                        hint=f"{hint}. An object-level check is named by the full "
                        "dotted path of its function ('orders.perms.owns_order'). A "
                        "permission created another way (a data migration, another "
                        "authentication backend): add 'xsm.W006' to "
                        "SILENCED_SYSTEM_CHECKS",
                        id="xsm.W006",
                    )
                )
    return out


def _outbox(s: conf.XsmSettings) -> list[CheckMessage]:
    """``xsm.E014``: a handler that will not load (the worker would refuse
    to start); ``xsm.E013``: a type a chart emits that no pattern takes
    (the worker would dead-letter every such event)."""
    out: list[CheckMessage] = [
        Error(problem, id="xsm.E014") for problem in handler_problems(s.outbox.handlers)
    ]
    for found in unhandled_emits(s.outbox.handlers):
        where = ", ".join(found.paths[:3]) + (", ..." if len(found.paths) > 3 else "")
        out.append(
            Error(
                f"Machine {found.machine!r} emits {found.event_type!r} (at {where}), which no "
                "pattern of XSM['OUTBOX']['HANDLERS'] takes",
                hint=f"add a handler, e.g. XSM['OUTBOX']['HANDLERS'][{found.event_type!r}] = "
                "'yourapp.effects.handler' (or a pattern such as 'order.*' or '*'); until then "
                "xsm_run_outbox dead-letters these events",
                id="xsm.E013",
            )
        )
    return out


def _timeouts(s: conf.XsmSettings) -> list[CheckMessage]:
    found = detect_request_timeout(s)
    if found is None:
        return []
    timeout, source = found
    out: list[CheckMessage] = []
    if s.lock_ttl_ms / 1000 < timeout:
        out.append(
            Warning(
                f"XSM['LOCK_TTL_MS'] ({s.lock_ttl_ms} ms) is shorter than the request timeout "
                f"({timeout:g} s, from {source})",
                hint="a pessimistic lock (and, by default, an idempotency claim) can expire "
                "while a slow request still runs; its commit then fails with 409. Raise "
                "LOCK_TTL_MS above the request timeout",
                id="xsm.W001",
            )
        )
    lease = s.idempotency.lease_s
    if lease is not None and lease < timeout:
        out.append(
            Warning(
                f"XSM['IDEMPOTENCY']['LEASE_S'] ({lease:g} s) is shorter than the request "
                f"timeout ({timeout:g} s, from {source})",
                hint="a retry can start while the first attempt still runs (the version fence "
                "still prevents a double commit); raise LEASE_S above the request timeout",
                id="xsm.W002",
            )
        )
    return out


@register("xsm")
def check_settings(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Every non-deploy check (see the module docstring)."""
    try:
        s = conf.get_settings()
    except conf.InvalidSettings as exc:
        # every problem at once, so one round of fixes is enough
        return [Error(p, hint="see docs/settings.md", id="xsm.E001") for p in exc.problems]
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint="see docs/settings.md", id="xsm.E001")]
    return [*_connection(s), *_callables(s), *_machines(s), *_outbox(s), *_timeouts(s)]


def _persistence() -> list[CheckMessage]:
    """What the server says, asked only when it answers: ``xsm.E011`` (it
    refuses our credentials), ``xsm.W012`` (it keeps nothing on disk, so a
    restart loses every instance), then :func:`_topology`. The first
    question is one round trip; when CONFIG is not allowed or the server
    cannot be reached nothing more is asked (the readiness probe reports
    that)."""
    try:
        persists = backend.get_store().persists_data()
    except StoreAuthenticationError as exc:
        return [
            Error(
                f"Redis refused django-xsm's credentials or permissions ({exc.cause or 'auth'})",
                hint="fix the password or user in XSM['REDIS_URL'] (or the cache's LOCATION, or "
                "XSM['SENTINEL']['OPTIONS']), or grant the ACL user the commands django-xsm "
                "runs (EVALSHA, EVAL, SCRIPT, HGET, HMGET, TIME...); no retry fixes this",
                id="xsm.E011",
            )
        ]
    except NotAClusterNode as exc:
        return [Error(str(exc), id="xsm.E012")]
    except (XsmError, ImproperlyConfigured):
        return []
    out: list[CheckMessage] = []
    if persists is False:
        out.append(
            Warning(
                "The Redis server keeps nothing on disk (no AOF, no RDB snapshots): a restart "
                "loses every instance, idempotency receipt and timer",
                hint="enable appendonly yes (or save rules) on the server; django-xsm detects "
                "and logs a namespace reset, but cannot bring the data back",
                id="xsm.W012",
            )
        )
    return out + _topology(conf.get_settings(), backend.get_backend().client) + _changed_charts()


def _topology(s: conf.XsmSettings, client: Any) -> list[CheckMessage]:
    """``xsm.E012``: a plain client on a cluster node (one ``INFO
    cluster``); ``xsm.W013``: on a cluster, too few buckets for its masters
    (one ``HMGET`` of the schema marker; nothing is created)."""
    node = cluster_node_problem(s, client)
    if node is not None:
        return [Error(node.message, hint=node.hint, id=node.id)]
    assert s.prefix is not None  # the store was built: require_usable saw a prefix
    try:
        info = namespace_info(client, s.prefix, s.buckets)
    except XsmError:
        return []
    spread = bucket_problem(info)
    return [] if spread is None else [Warning(spread.message, hint=spread.hint, id=spread.id)]


def _changed_charts() -> list[CheckMessage]:
    """``xsm.E015``: stored instances this code cannot load (see
    :func:`~django_xsm.backend.readiness.changed_machines`); at most
    ``CHANGE_SAMPLE`` instances read per registered machine."""
    try:
        found = changed_machines(backend.get_store(), [e.machine for e in machines.values()])
    except (XsmError, ImproperlyConfigured):
        return []  # Redis stopped answering: the readiness probe's to report
    return [
        Error(
            f"Machine {machines.name_for_machine_id(c.machine_id, c.machine_id)!r} "
            f"(version {c.version!r}): {c.failed} of the {c.sampled} stored instance(s) "
            f"sampled cannot be loaded by this code, e.g. {c.key!r}: {c.reason}",
            hint=f"{c.hint + '; ' if c.hint else ''}see 'Changing a chart' in docs/models.md. "
            "Until then every request on these instances answers 500 machine-changed and "
            f"their timers fail (at most {CHANGE_SAMPLE} instances per machine are read)",
            id="xsm.E015",
        )
        for c in found
    ]


def _plaintext_sentinel(cfg: conf.Sentinel) -> list[CheckMessage]:
    """``xsm.W010`` for Sentinel: no TLS on a leg that leaves this host."""
    remote = any(host not in _LOCAL_HOSTS for host, _ in cfg.hosts)
    legs = [
        name
        for name, options in (("OPTIONS", cfg.options), ("SENTINEL_OPTIONS", cfg.sentinel_options))
        if not options.get("ssl")
    ]
    if not remote or not legs:
        return []
    return [
        Warning(
            f"XSM['SENTINEL'] talks plaintext to remote hosts (no ssl in {' and '.join(legs)})",
            hint="set 'ssl': True in XSM['SENTINEL']['OPTIONS'] (the primary) and "
            "['SENTINEL_OPTIONS'] (the sentinels) unless the network path is private and trusted",
            id="xsm.W010",
        )
    ]


@register("xsm", deploy=True)
def check_deploy(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Checks that only matter in production (``check --deploy``)."""
    try:
        s = conf.get_settings()
    except ImproperlyConfigured:
        return []  # reported as xsm.E001 by check_settings
    out: list[CheckMessage] = []
    if s.redis_url:
        try:
            parts = urlsplit(s.redis_url)
            host = parts.hostname or ""
        except ValueError:
            parts, host = None, ""
        if parts is not None and parts.scheme == "redis" and host not in _LOCAL_HOSTS:
            out.append(
                Warning(
                    "XSM['REDIS_URL'] talks plaintext redis:// to a remote host",
                    hint="use rediss:// (TLS) unless the network path is private and trusted",
                    id="xsm.W010",
                )
            )
    if s.sentinel is not None:
        out.extend(_plaintext_sentinel(s.sentinel))
    if s.has_server:
        out.extend(_persistence())
    elif s.uses_embedded:
        out.append(
            Warning(
                "The XSM store is the embedded in-process fakeredis",
                hint="every worker has its own state, lost on restart; set XSM['REDIS_URL']",
                id="xsm.W011",
            )
        )
        out.extend(_changed_charts())
    return out
