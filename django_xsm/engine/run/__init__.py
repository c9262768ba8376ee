"""The run: executing a compiled chart, one event at a time.

* ``program``: what a run reads of its machine (chart, configurations,
  microstep cap, version and migrations);
* ``state``: the runtime state of one instance (:class:`RunState`) and the
  status constants ``ACTIVE`` / ``DONE``;
* ``configuration``: interned sets of active states and their XState values;
* ``selection``: which transitions an event enables;
* ``microstep``: one microstep computed as a plan; ``macrostep``: plans run
  to completion (a built-in action runs through its module of
  :mod:`django_xsm.engine.actions`); ``runner``: one ``send()`` (cached selections, rollback);
* ``deadlines``, ``context``, ``snapshot``, ``results``: armed delayed
  transitions, context copies, the snapshot dict, the receipts and pure
  results handed back.
"""
