"""The WSGI application gunicorn serves in the stream tests (with the apps'
static files, so the admin the browser tests show has its CSS)."""

from __future__ import annotations

from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.wsgi import get_wsgi_application

application = StaticFilesHandler(get_wsgi_application())
