"""xstate-statemachine 0.11.0 (the peer) behind the same Django view, on
its Redis persistence (the same kind of redis-server as django-xsm's)."""

from __future__ import annotations

from base_settings import *  # noqa: F403

ROOT_URLCONF = "site_peer.urls"
WSGI_APPLICATION = "site_peer.wsgi.application"
