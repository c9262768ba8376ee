"""Property-based: hostile headers and bodies never make a 500. Whatever a
client sends in ``Idempotency-Key``, ``X-Request-ID``, ``traceparent`` or
the JSON body of a decorated view, the answer is a success or a 4xx, and a
4xx writes nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_xsm.registry import machines

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
