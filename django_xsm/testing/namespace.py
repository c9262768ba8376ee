"""A namespace of its own for each test.

:class:`TestNamespace` replaces ``settings.XSM`` for the length of a test
with the project's settings and a ``PREFIX`` nobody else uses:

* when the settings name a Redis (``REDIS_URL``, ``CACHE_ALIAS`` or
  ``SENTINEL``), the test works on that server under its own prefix, and
  every key of the prefix is deleted after the test (``SCAN`` for
  ``{prefix}*`` and ``{prefix:*``, never ``FLUSHDB``);
* otherwise on the embedded in-process fakeredis (``EMBEDDED``), which a
  settings change replaces with an empty one.

Either way instances, idempotency receipts, transition logs, timers and
outbox entries of one test are invisible to every other, in this process
and in the other processes of ``pytest -n`` (the prefix is random). The
settings change also rebuilds what django-xsm built from the settings
(clients, stores, the compiled machines), as for any ``XSM`` change.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.test.utils import override_settings

from django_xsm import backend
from django_xsm.exceptions import InvalidConfigError
from django_xsm.redis import escape_glob

__all__ = ["TestNamespace", "require_django_xsm"]

#: Keys deleted per round trip after a test on a real Redis.
_PAGE = 500


def require_django_xsm() -> None:
    """Refuse to run without Django configured and ``django_xsm`` installed."""
    if not settings.configured:
        raise InvalidConfigError(
            "Django settings are not configured",
            path="DJANGO_SETTINGS_MODULE",
            hint="set DJANGO_SETTINGS_MODULE (with pytest-django: in pytest.ini or "
            "--ds=yourproject.settings)",
        )
    from django.apps import apps

    if not apps.ready:
        raise InvalidConfigError(
            "Django's apps are not loaded yet",
            path="INSTALLED_APPS",
            hint="run the tests with pytest-django, or call django.setup() first",
        )
    if not apps.is_installed("django_xsm"):
        raise InvalidConfigError(
            "'django_xsm' is not in INSTALLED_APPS",
            path="INSTALLED_APPS",
            hint="add 'django_xsm' to INSTALLED_APPS of the settings the tests run with",
        )


def _names_a_redis(xsm: dict[str, Any]) -> bool:
    return bool(xsm.get("REDIS_URL") or xsm.get("CACHE_ALIAS") or xsm.get("SENTINEL"))


class TestNamespace:
    """The test's own ``XSM`` (see the module docstring): :meth:`enter`
    switches to it, :meth:`leave` erases it (on a real Redis) and puts the
    project's settings back.

    ``settings``: pytest-django's ``settings`` fixture, when the test has
    it: the change then goes through it, so it and every change the test
    makes through it are undone together, in order, after the test (an
    ``override_settings`` of its own would be undone before changes made
    on top of it)."""

    __test__ = False  # not a test class, whatever its name says to pytest

    def __init__(self, settings_fixture: Any = None) -> None:
        self._fixture = settings_fixture
        project = getattr(settings, "XSM", None) or {}
        if not isinstance(project, dict):
            raise InvalidConfigError(
                f"settings.XSM must be a dict, not {type(project).__name__}", path="XSM"
            )
        base = str(project.get("PREFIX") or "xsm")[:40]
        self.prefix = f"{base}-test-{uuid.uuid4().hex[:12]}"
        #: True on the configured Redis, False on the embedded fakeredis.
        self.on_redis = _names_a_redis(project)
        changes: dict[str, Any] = {"PREFIX": self.prefix}
        if not self.on_redis:
            changes["EMBEDDED"] = True
        self._xsm = {**project, **changes}
        self._override = override_settings(XSM=self._xsm)
        self._entered = False

    def enter(self) -> None:
        if self._fixture is not None:
            self._fixture.XSM = self._xsm
        else:
            self._override.enable()
        self._entered = True

    def leave(self) -> None:
        """Erase the namespace (on a real Redis) and restore the settings;
        the settings are restored even when the erase fails."""
        if not self._entered:
            return
        self._entered = False
        try:
            if self.on_redis:
                self._erase()
        finally:
            if self._fixture is None:  # else the fixture puts them back after the test
                self._override.disable()

    def _erase(self) -> None:
        found = backend.get_backend()
        client = found.client
        try:
            for pattern in (f"{{{escape_glob(self.prefix)}}}*", f"{{{escape_glob(self.prefix)}:*"):
                keys = list(client.scan_iter(match=pattern, count=_PAGE))
                for start in range(0, len(keys), _PAGE):
                    # one key per command: on a cluster the keys live on many slots
                    pipe = client.pipeline(transaction=False)
                    for key in keys[start : start + _PAGE]:
                        pipe.delete(key)
                    pipe.execute()
        finally:
            if found.source != "cache":  # a django-redis client belongs to its cache
                client.close()

    def __repr__(self) -> str:
        where = "redis" if self.on_redis else "embedded"
        return f"<TestNamespace {self.prefix!r} ({where})>"
