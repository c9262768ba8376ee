"""Integrations with optional third-party packages.

Each subpackage needs its extra installed (``django-xsm[drf]`` for
:mod:`django_xsm.contrib.drf`) and is imported only by the project that uses
it: nothing else in django_xsm imports ``django_xsm.contrib``, so the app
itself never needs the optional package. Importing a subpackage without its
extra raises an ``ImportError`` that names the ``pip install`` to run
(:func:`missing_extra`).
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["missing_extra"]


def missing_extra(
    exc: ImportError, subpackage: str, *, extra: str, module: str, distribution: str
) -> NoReturn:
    """Raise, for ``exc`` met importing ``module`` (what the extra installs)
    in ``django_xsm.contrib.<subpackage>``, an ``ImportError`` naming the
    ``pip install`` to run; an ``ImportError`` from inside an installed
    ``module`` (a broken installation) is raised as it is."""
    missing = exc.name or ""
    if missing and missing != module and not module.startswith(missing + "."):
        raise exc
    raise ImportError(
        f"django_xsm.contrib.{subpackage} needs {distribution}, which is not installed: "
        f'pip install "django-xsm[{extra}]"',
        name=module,
    ) from exc
