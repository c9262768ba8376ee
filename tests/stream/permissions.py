"""``XSM['STREAM']['PERMISSION']`` functions of the stream tests."""

from __future__ import annotations

from django.http import HttpRequest


def anyone(request: HttpRequest, key: str) -> bool:
    return True


def nobody(request: HttpRequest, key: str) -> bool:
    return False


def token(request: HttpRequest, key: str) -> bool:
    """The two-server tests: a header names the keys a client may follow."""
    return request.headers.get("X-Test-Token") == "let-me-in" and not key.startswith("secret:")


NOT_CALLABLE = 42
