"""Property-based: hostile headers and bodies never make a 500. Whatever a
client sends in ``Idempotency-Key``, ``X-Request-ID``, ``traceparent`` or
the JSON body of a decorated view (nested deep, megabytes long, a ``type``
of any JSON value), the answer is a success or a 4xx problem document, a
4xx writes nothing, and nothing is logged at ERROR."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from django_xsm.registry import machines
from tests.django.conftest import problem

HEADER_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=300),
    st.sampled_from(
        ["a\n", "a, b", '"a", "b"', '"x', "\x00", " ", "x" * 300, "é", "00-" + "0" * 32]
    ),
)
JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
    st.sampled_from(["\ud800", "actor", "type"]),
)  # fmt: skip
BODIES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(key=HEADER_TEXT, request_id=HEADER_TEXT, traceparent=HEADER_TEXT, body=BODIES)
def test_hostile_headers_and_bodies_never_make_a_500(
    client: Any, backend: Any, key: str, request_id: str, traceparent: str, body: Any
) -> None:
    tid = "fz"
    payload = (
        {"type": "BUMP", "data": body} if not isinstance(body, dict) else {**body, "type": "BUMP"}
    )
    raw = json.dumps(payload, ensure_ascii=True)
    headers = {
        "HTTP_IDEMPOTENCY_KEY": key,
        "HTTP_X_REQUEST_ID": request_id,
        "HTTP_TRACEPARENT": traceparent,
    }
    before = machines["ticket"].objects.exists(f"ticket:{tid}") and len(
        machines["ticket"].objects.history(f"ticket:{tid}")
    )
    response = client.post(
        f"/t/{tid}/splat_mapping", data=raw, content_type="application/json", **headers
    )
    assert response.status_code < 500, (response.status_code, response.content[:300])
    if response.status_code >= 400:
        after = machines["ticket"].objects.exists(f"ticket:{tid}") and len(
            machines["ticket"].objects.history(f"ticket:{tid}")
        )
        assert after == before  # a refused request wrote nothing


# --- hostile bodies through docs/django.md's pattern: instance.send(json body) ---------
#
# The views parse the body themselves (json.loads, sync and async) and send it
# as a mapping event. Whatever the depth, size or ``type`` of the body, the
# answer is a success or a 4xx problem document, a refusal writes nothing,
# and nothing is logged at ERROR.

VIEWS = ["splat_mapping", "asplat_mapping"]
#: A body small enough for the test: DATA_UPLOAD_MAX_MEMORY_SIZE is lowered
#: to it, so the sizes drawn cross it and XSM['MAX_PAYLOAD_BYTES'] (65536).
BODY_LIMIT = 100_000
TYPES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.just(""), st.text(max_size=30),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.none()),
    st.sampled_from(["BUMP", "CLOSE", "REOPEN", "NOPE", " ", "\ud800", "x" * 300]),
)  # fmt: skip
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def nested_lists(depth: int) -> str:
    """JSON of ``depth`` nested lists, built as text (json.dumps would recurse)."""
    return "[" * depth + "1" + "]" * depth


def _written(tid: str) -> tuple[bool, int]:
    objects = machines["ticket"].objects
    key = f"ticket:{tid}"
    return objects.exists(key), len(objects.history(key)) if objects.exists(key) else 0


def _post_body(client: Any, view: str, raw: str) -> tuple[Any, str]:
    tid = uuid.uuid4().hex
    response = client.post(
        f"/t/{tid}/{view}",
        data=raw,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex,
    )
    return response, tid


def assert_refused_cleanly(response: Any, tid: str, caplog: Any) -> dict[str, Any]:
    """A 4xx problem document; nothing stored; no ERROR logged."""
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    body = problem(response)
    assert _written(tid) == (False, 0)
    assert_no_error_logged(caplog)
    return body


def assert_no_error_logged(caplog: Any) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [(r.name, r.getMessage()[:200]) for r in errors]


@pytest.mark.parametrize("view", VIEWS)
@FUZZ
@given(depth=st.integers(min_value=1, max_value=400))
@example(depth=99)
@example(depth=100)
@example(depth=400)
def test_a_deep_body_is_a_4xx_problem_never_a_500(
    client: Any, backend: Any, caplog: Any, view: str, depth: int
) -> None:
    """The payload dict is level 1: 99 nested lists are the most it may hold
    (the engine's 100 levels); 400 is as deep as the view's own json.loads
    parses on every supported Python (3.11 stops near 1000)."""
    caplog.clear()
    response, tid = _post_body(client, view, '{"type": "BUMP", "d": ' + nested_lists(depth) + "}")
    if depth <= 99:
        assert response.status_code == 200, response.content[:300]
        return
    body = assert_refused_cleanly(response, tid, caplog)
    assert response.status_code == 422 and body["type"].endswith("/unstorable-value")
    assert "nested more than 100 levels" in body["detail"]


@pytest.mark.parametrize("view", VIEWS)
@FUZZ
@given(size=st.integers(min_value=0, max_value=BODY_LIMIT + 20_000))
@example(size=65536 - 11)  # the payload {"text":"..."} is exactly the limit
@example(size=65536 - 10)
@example(size=BODY_LIMIT)
def test_a_large_body_is_a_413_problem_never_a_500(
    client: Any, backend: Any, caplog: Any, settings: Any, view: str, size: int
) -> None:
    caplog.clear()
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = BODY_LIMIT
    raw = json.dumps({"type": "BUMP", "text": "a" * size})
    payload_bytes = len(json.dumps({"text": "a" * size}, separators=(",", ":")))
    response, tid = _post_body(client, view, raw)
    if len(raw) <= BODY_LIMIT and payload_bytes <= 65536:
        assert response.status_code == 200, response.content[:300]
        return
    body = assert_refused_cleanly(response, tid, caplog)
    assert response.status_code == 413 and body["type"].endswith("/payload-too-large")
    assert body["max_bytes"] == (BODY_LIMIT if len(raw) > BODY_LIMIT else 65536)


@pytest.mark.parametrize("view", VIEWS)
@FUZZ
@given(etype=TYPES, with_type=st.booleans())
@example(etype=None, with_type=False)  # {}
@example(etype=None, with_type=True)
@example(etype="", with_type=True)
@example(etype=42, with_type=True)
@example(etype="\ud800", with_type=True)  # echoed in the problem: JSON-escaped
def test_any_type_is_a_success_or_a_4xx_problem(
    client: Any, backend: Any, caplog: Any, view: str, etype: Any, with_type: bool
) -> None:
    caplog.clear()
    raw = json.dumps({"type": etype, "n": 1} if with_type else {"n": 1})
    response, tid = _post_body(client, view, raw)
    if response.status_code == 200:
        assert etype in ("BUMP", "REOPEN") or isinstance(etype, str)
        return
    body = assert_refused_cleanly(response, tid, caplog)
    if not with_type or not isinstance(etype, str) or not etype:
        assert response.status_code == 400 and body["type"].endswith("/invalid-event")
