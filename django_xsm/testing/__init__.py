"""Testing your own charts, views and handlers (docs/testing.md).

* the pytest plugin (:mod:`.plugin`, loaded by pytest through the
  ``pytest11`` entry point ``django_xsm``): the ``xsm`` fixture and
  ``--xsm-coverage``;
* :class:`XsmTestCase`: the same helper as ``self.xsm`` in a
  ``django.test.TestCase``;
* :class:`Xsm` (:mod:`.helper`): a namespace of the test's own
  (:mod:`.namespace`), a clock that moves only with ``advance()``
  (:mod:`.clock`), the outbox (``emitted``, ``deliver()``), the transition
  log (``history()``), on-commit callbacks as in production
  (:mod:`.commits`);
* :func:`shortest_paths` (:mod:`.paths`): the shortest event sequence to
  every reachable state;
* chart coverage (:mod:`.coverage`), counted from the engine's steps.

The names below are imported on first use: pytest imports this package at
start-up, before Django is configured, in every project that has
django-xsm installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cases import XsmTestCase
    from .clock import TestClock
    from .helper import EmittedEvent, Xsm
    from .paths import Path, Step, shortest_paths

__all__ = ["EmittedEvent", "Path", "Step", "TestClock", "Xsm", "XsmTestCase", "shortest_paths"]

_HOMES = {
    "EmittedEvent": ".helper",
    "Path": ".paths",
    "Step": ".paths",
    "TestClock": ".clock",
    "Xsm": ".helper",
    "XsmTestCase": ".cases",
    "shortest_paths": ".paths",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
