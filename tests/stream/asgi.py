"""The ASGI application uvicorn serves in the stream tests (with the apps'
static files, so the admin the browser tests show has its CSS)."""

from __future__ import annotations

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

application = ASGIStaticFilesHandler(get_asgi_application())
