"""The chart: an XState JSON config turned into a checked, compiled, immutable chart.

``config`` and ``config_transitions`` validate the JSON into the plain
records of ``specs`` (every problem collected with its JSON path by
``problems``); ``build`` resolves ids, targets and the named logic of
``logic`` into the node model of ``model``; ``compiled`` holds the result,
a :class:`~django_xsm.engine.chart.compiled.Chart`. Nothing here runs a
chart: see :mod:`django_xsm.engine.run`.
"""
