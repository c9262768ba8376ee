"""The chart: an XState JSON config turned into a checked, compiled, immutable chart.

``config`` validates the JSON into the records of ``specs``, ``build``
compiles them into the nodes of ``model``, bound to a ``logic``; the
result is a ``compiled.Chart``. Nothing here runs a chart: see :mod:`django_xsm.engine.run`.
"""
