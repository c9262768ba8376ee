"""django-xsm: statecharts for Django whose state lives in Redis.

Importing this package needs no Django settings; the layers are
``django_xsm.engine`` (pure interpreter), ``django_xsm.persistence``
(stores, locks, plugins, timers), ``django_xsm.redis`` (Redis backends) and
the Django glue at the top level.
"""

__version__ = "0.1.0"
