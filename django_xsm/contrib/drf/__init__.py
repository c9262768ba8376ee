"""Django REST framework integration (the ``django-xsm[drf]`` extra).

* :class:`StatechartSerializerField`: a row's state (and, optionally, the
  events the requesting user may send) in a serializer;
* :class:`StatechartEventsMixin`: ``POST .../{pk}/events/`` on a viewset,
  with the HTTP contract of ``@stateful_view`` (docs/http.md): idempotency
  keys and replays, per-event permissions, RFC 9457 problems.

With drf-spectacular installed, its schema extensions are registered on
import (:mod:`django_xsm.contrib.drf.schema`). See ``docs/drf.md``.
"""

from __future__ import annotations

import importlib.util

from django_xsm.contrib import missing_extra

try:
    import rest_framework  # noqa: F401  (what the extra installs)
except ImportError as exc:
    missing_extra(
        exc, "drf", extra="drf", module="rest_framework", distribution="djangorestframework"
    )

from .mixins import StatechartEventsMixin
from .problems import ProblemResponse
from .serializers import (
    StatechartEventResultSerializer,
    StatechartEventSerializer,
    StatechartSerializerField,
)

__all__ = [
    "ProblemResponse",
    "StatechartEventResultSerializer",
    "StatechartEventSerializer",
    "StatechartEventsMixin",
    "StatechartSerializerField",
]

# drf-spectacular is optional: its extensions register when their classes
# are defined, so the module is imported only when the package is there
# (and an ImportError inside it is not mistaken for its absence).
if importlib.util.find_spec("drf_spectacular") is not None:
    from . import schema  # noqa: F401
