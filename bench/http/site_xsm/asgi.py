import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site_xsm.settings")
os.environ.setdefault("BENCH_ASYNC", "1")
application = get_asgi_application()
