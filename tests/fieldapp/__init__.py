"""A test app whose models hold statecharts (``StatechartField``)."""
