"""The chart: an XState JSON config turned into a checked, compiled, immutable chart.

* ``config``, ``config_transitions``: validate the JSON into the plain
  records of ``specs``, every problem collected with its JSON path
  (``problems``); a built-in action's form is checked by its own module of
  :mod:`django_xsm.engine.actions`;
* ``logic``: :class:`MachineLogic`, the functions the chart names;
* ``build``: resolves ids, targets and names into the node model of
  ``model``; ``compiled``: the result, a :class:`Chart`.

Nothing here runs a chart: see :mod:`django_xsm.engine.run`.
"""
