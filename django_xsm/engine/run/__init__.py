"""The run: executing a compiled chart, one event at a time.

``state`` is the runtime state of one instance (:class:`RunState` and the
status constants); ``configuration`` the interned sets of active states
and their XState values; ``selection`` picks transitions; ``microstep``
computes one microstep as a plan and ``macrostep`` runs plans to
completion; ``runner`` is one ``send()`` (cached selections, rollback);
``deadlines`` the armed delayed transitions; ``snapshot`` the JSON form of
the runtime state; ``results`` the receipts and pure results handed back.
"""
