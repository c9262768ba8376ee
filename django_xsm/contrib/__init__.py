"""Integrations with optional third-party packages.

Each subpackage needs its extra installed (``django-xsm[drf]`` for
:mod:`django_xsm.contrib.drf`) and is imported only by the project that uses
it: nothing else in django_xsm imports ``django_xsm.contrib``, so the app
itself never needs the optional package.
"""
