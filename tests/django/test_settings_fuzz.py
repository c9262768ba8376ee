"""Property-based: no XSM setting, however wrong, crashes parsing or the
system checks. Either the settings parse, or ``ImproperlyConfigured`` names
the problems; the checks report errors, never raise."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_xsm import conf
from django_xsm.checks import check_settings

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.just("."),
    st.just("x" * 5000),
    st.sampled_from(["optimistic", "pessimistic", "POST", "GET", "redis://127.0.0.1:1/0"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4),
    ),
    max_leaves=12,
)
KEYS = st.sampled_from([*conf.DEFAULTS, "PREFX", "lock", ""])
NESTED = {
    name: st.dictionaries(st.sampled_from([*conf.DEFAULTS[name], "NOPE"]), VALUES, max_size=4)
    for name in ("IDEMPOTENCY", "AUDIT", "TIMERS")
}


@st.composite
def xsm_settings(draw: Any) -> dict[Any, Any]:
    found = draw(st.dictionaries(KEYS, VALUES, max_size=6))
    for name, strategy in NESTED.items():
        if draw(st.booleans()):
            found[name] = draw(strategy)
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(xsm_settings())
def test_parse_either_works_or_names_the_problems(value: dict[Any, Any]) -> None:
    try:
        parsed = conf.parse(value, debug=False)
    except ImproperlyConfigured as exc:
        text = str(exc)
        assert text and len(text) < 20_000
        if isinstance(exc, conf.InvalidSettings):
            assert exc.problems and all(p.startswith(("XSM", "Unknown")) for p in exc.problems)
    else:
        assert isinstance(parsed, conf.XsmSettings)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(xsm_settings())
def test_the_system_checks_never_raise(value: dict[Any, Any]) -> None:
    with override_settings(XSM={"PREFIX": "fuzz", "EMBEDDED": True, **value}):
        messages = check_settings()
    assert all(m.id and m.id.startswith("xsm.") for m in messages)
