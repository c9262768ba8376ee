"""``manage.py xsm_namespace``: the namespace's schema marker, and on a
Redis Cluster how its buckets spread over the masters; ``--create`` makes
a new namespace with a chosen bucket count."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import CommandError

from django_xsm import backend, conf
from django_xsm.backend.readiness import (
    BUCKETS_PER_MASTER,
    NamespaceInfo,
    bucket_problem,
    namespace_info,
)
from django_xsm.management import XsmCommand, command_errors, int_type
from django_xsm.redis import RedisStore


class Command(XsmCommand):
    help = """Show the namespace of XSM['PREFIX']: whether it exists, its key layout,
bucket count and namespace id, and on a Redis Cluster how many buckets each
master holds (each bucket is one hash slot; at least 8 per master spread
the instances evenly). Nothing is written.

--create makes the namespace's schema marker with --buckets N when the
namespace does not exist yet (the bucket count is fixed from then on), and
refuses when it exists with another count. Run it before the first request
would create the namespace with XSM['BUCKETS'] (or 16), and set
XSM['BUCKETS'] to the same N.

--upgrade-layout moves a namespace of an older key layout to this
version's (docs/redis.md, "Layout versions"). Stop every process running
the older django-xsm first: it cannot read records written afterwards.

examples:
  manage.py xsm_namespace
  manage.py xsm_namespace --upgrade-layout
  manage.py xsm_namespace --json
  manage.py xsm_namespace --create --buckets 48
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")
        parser.add_argument(
            "--create",
            action="store_true",
            help="Create the namespace if it does not exist (with --buckets, or "
            "XSM['BUCKETS'], or 16).",
        )
        parser.add_argument(
            "--upgrade-layout",
            action="store_true",
            help="Upgrade the namespace's key layout to this version's (stop older "
            "django-xsm processes first).",
        )
        parser.add_argument(
            "--buckets",
            type=int_type("--buckets", minimum=1, maximum=1_000_000),
            metavar="N",
            help="Bucket count of the namespace --create makes (at most 1024).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["buckets"] is not None and not options["create"]:
            raise CommandError("--buckets goes with --create (the count of a new namespace)")
        with command_errors():
            found = backend.get_backend()
            s = conf.get_settings()
            assert s.prefix is not None  # get_backend() refused a missing prefix
            info = namespace_info(found.client, s.prefix, s.buckets)
            created = False
            if options["upgrade_layout"]:
                before, after = RedisStore(found.client, prefix=s.prefix).upgrade_layout()
                info = namespace_info(found.client, s.prefix, s.buckets)
                if before != after:
                    self.say(
                        f"Upgraded namespace {s.prefix!r} from key layout {before} to {after}",
                        style=self.style.SUCCESS,
                    )
            if options["create"]:
                wanted = options["buckets"] or s.buckets or info.buckets
                created = _create(found.client, info, wanted, s.buckets)
                info = namespace_info(found.client, s.prefix, s.buckets)
        data = _document(info, found.description, created=created)
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
            return
        for line in render(data):
            self.stdout.write(line)
        if created:
            self.say(
                f"Created namespace {info.prefix!r} with {info.buckets} buckets",
                style=self.style.SUCCESS,
            )
        if data["warning"]:
            self.stderr.write(self.style.WARNING(f"warning: {data['warning']}"))


def _create(client: Any, info: NamespaceInfo, wanted: int, configured: int | None) -> bool:
    """Create the namespace with ``wanted`` buckets; False when it already
    exists with that count. Refuses what the app's stores would refuse."""
    if configured is not None and configured != wanted:
        raise CommandError(
            f"XSM['BUCKETS'] is {configured} but --buckets is {wanted}: the app's stores "
            f"would refuse this namespace; set XSM['BUCKETS'] = {wanted} (or drop it)"
        )
    if info.exists:
        if info.buckets == wanted:
            return False
        raise CommandError(
            f"Namespace {info.prefix!r} already exists with {info.buckets} buckets, not "
            f"{wanted}; the bucket count is fixed when a namespace is created: set a new "
            f"XSM['PREFIX'] (and XSM['BUCKETS'] = {wanted}) and run --create again"
        )
    # A store creates the schema marker on its first operation (the SCHEMA
    # script: created if absent, atomically); health() is the cheapest one.
    health = RedisStore(client, prefix=info.prefix, buckets=wanted).health()
    if not health.get("ok"):
        raise CommandError(
            f"Could not create namespace {info.prefix!r} ({health.get('error', 'unknown')}); "
            "check the server, then run the command again"
        )
    return True


def _document(info: NamespaceInfo, store: str, *, created: bool) -> dict[str, Any]:
    problem = bucket_problem(info)
    data = asdict(info)
    data["spread"] = dict(info.spread)
    data.update(
        store=store,
        cluster=info.cluster,
        created=created,
        buckets_per_master_wanted=BUCKETS_PER_MASTER if info.cluster else None,
        warning=None if problem is None else f"{problem.message} ({problem.hint})",
    )
    return data


def render(data: dict[str, Any]) -> list[str]:
    """The text form of the command's JSON document."""
    if data["exists"]:
        status = "exists"
    else:
        status = f"not created yet (the first use creates it with {data['buckets']} buckets)"
    lines = [
        f"namespace     {data['prefix']}",
        f"  store       {data['store']}",
        f"  status      {status}",
        f"  layout      {data['layout'] or '-'}",
        f"  buckets     {data['buckets']}",
        f"  id          {data['namespace_id'] or '-'}",
    ]
    if data["cluster"]:
        lines.append(f"  masters     {len(data['masters'])}")
        width = max(len(m) for m in data["masters"])
        lines += [
            f"    {master.ljust(width)}  {count} bucket{'s' if count != 1 else ''}"
            for master, count in data["spread"].items()
        ]
    return lines
