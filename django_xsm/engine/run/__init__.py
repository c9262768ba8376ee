"""The run: executing a compiled chart, one event at a time.

``selection`` picks the transitions an event enables, ``microstep`` turns
them into a plan, ``macrostep`` runs plans to completion and ``runner`` is
one ``send()``; the other modules hold what they read and write.
"""
