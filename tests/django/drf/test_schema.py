"""The OpenAPI schema (drf-spectacular): the events endpoint with its body,
header and every status, the serializer field, and DRF's own generator."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import include, path
from rest_framework.routers import SimpleRouter

from tests.django.drf import views

pytest.importorskip("drf_spectacular")

from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema, extend_schema_view
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db

SPECTACULAR = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}
EVENTS = "/api/orders/{id}/events/"


@pytest.fixture
def schema(settings: Any) -> Any:
    """``schema(**generator_kwargs)``: the OpenAPI document, checked valid
    and generated without a single drf-spectacular warning or error."""
    settings.REST_FRAMEWORK = SPECTACULAR

    def generate(**kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("urlconf", "tests.django.drf.urls")
        GENERATOR_STATS.reset()
        document: dict[str, Any] = SchemaGenerator(**kwargs).get_schema(request=None, public=True)
        assert not GENERATOR_STATS, (GENERATOR_STATS._warn_cache, GENERATOR_STATS._error_cache)
        validate_schema(document)
        return document

    return generate


def _header(operation: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [p for p in operation["parameters"] if p["in"] == "header" and p["name"] == name]
    return found


def test_the_events_endpoint_has_its_body_and_every_status(schema: Any) -> None:
    document = schema()
    operation = document["paths"][EVENTS]["post"]
    assert set(document["paths"][EVENTS]) == {"post"}
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/OrderStatusEvent"}
    components = document["components"]["schemas"]
    event = components["OrderStatusEvent"]
    assert event["required"] == ["type"] and event["additionalProperties"] is True
    assert event["properties"]["type"]["allOf"] == [
        {"$ref": "#/components/schemas/OrderStatusEventType"}
    ]
    assert components["OrderStatusEventType"]["enum"] == [
        "ADD", "PAY", "PAY_ANYWAY", "SHIP", "REFUND",
    ]  # fmt: skip
    responses = operation["responses"]
    assert set(responses) == {"200", "400", "403", "404", "409", "413", "422", "500", "503"}
    ok = responses["200"]
    assert ok["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/StatechartEventResult"
    }
    assert "Idempotent-Replayed" in ok["headers"]
    for status in ("400", "403", "404", "409", "413", "422", "500", "503"):
        assert responses[status]["content"] == {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
        }, status
    assert {s for s, r in responses.items() if "Retry-After" in r.get("headers", {})} == {
        "409",
        "503",
    }
    assert "event-not-accepted" in responses["409"]["description"]
    assert "payload-too-large" in responses["413"]["description"]
    assert "snapshot-too-large" in responses["422"]["description"]
    assert "not-durable" in responses["503"]["description"]
    assert set(components["Problem"]["required"]) == {"type", "title", "status", "detail"}
    assert _header(operation, "Idempotency-Key")["required"] is True


def test_each_model_gets_its_own_event_types(schema: Any) -> None:
    components = schema()["components"]["schemas"]
    assert components["ParcelStateEventType"]["enum"] == ["PACKED", "SPLIT", "LOADED"]
    assert "ShipmentDeliveryEvent" in components


def test_the_key_header_follows_the_settings_and_the_viewset(schema: Any, xsm: Any) -> None:
    document = schema()
    optional = document["paths"]["/api/optional-orders/{id}/events/"]["post"]
    assert _header(optional, "Idempotency-Key").get("required", False) is False
    xsm(IDEMPOTENCY={"REQUIRED": []})
    relaxed = schema()["paths"][EVENTS]["post"]
    assert _header(relaxed, "Idempotency-Key").get("required", False) is False


def test_the_serializer_field_schemas(schema: Any) -> None:
    order = schema()["components"]["schemas"]["Order"]["properties"]
    assert order["status"]["type"] == "string" and order["status"]["readOnly"] is True
    assert "type" not in order["status_value"]  # any JSON: a string or an object
    events = order["status_events"]
    assert events["type"] == "object" and events["readOnly"] is True
    assert events["required"] == ["state", "events"]
    assert events["properties"]["events"]["items"]["properties"] == {
        "type": {"type": "string"},
        "conditional": {"type": "boolean"},
    }


def test_a_viewset_that_annotates_events_keeps_its_annotation(schema: Any) -> None:
    # Defined once the schema fixture has switched DEFAULT_SCHEMA_CLASS:
    # extend_schema takes its base class from the settings when it runs.
    @extend_schema_view(events=extend_schema(summary="Our own words"))
    class AnnotatedViewSet(views.OrderViewSet):
        pass

    router = SimpleRouter()
    router.register("mine", AnnotatedViewSet, basename="mine")
    document = schema(urlconf=None, patterns=[path("", include(router.urls))])
    operation = document["paths"]["/mine/{id}/events/"]["post"]
    assert operation["summary"] == "Our own words"


@pytest.mark.filterwarnings("ignore:You have a duplicated operationId")  # five test viewsets
def test_drfs_own_schema_generator_still_works(settings: Any) -> None:
    """The action is annotated only when drf-spectacular generates: a
    project on DRF's AutoSchema keeps a working schema."""
    from rest_framework.schemas.openapi import SchemaGenerator as DrfGenerator

    settings.REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "rest_framework.schemas.openapi.AutoSchema"}
    document = DrfGenerator(urlconf="tests.django.drf.urls").get_schema(request=None, public=True)
    assert "post" in document["paths"][EVENTS]


def test_the_history_endpoint_has_its_parameters_page_and_problems(schema: Any) -> None:
    document = schema()
    path = "/api/orders/{id}/history/"
    assert set(document["paths"][path]) == {"get"}
    operation = document["paths"][path]["get"]
    query = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
    assert set(query) == {"cursor", "page_size"}
    assert "at most 200" in query["page_size"]["description"]
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/StatechartHistory"}
    page = document["components"]["schemas"]["StatechartHistory"]
    assert page["properties"]["next"]["nullable"] is True
    record = document["components"]["schemas"]["TransitionRecord"]
    assert {"seq", "event_type", "payload", "from_state", "to_state"} <= set(record["properties"])
    for status in ("400", "403", "404", "503"):
        content = operation["responses"][status]["content"]
        assert set(content) == {"application/problem+json"}, status
    staff = document["paths"]["/api/staff-orders/{id}/history/"]["get"]
    [size] = [p for p in staff["parameters"] if p["name"] == "page_size"]
    assert "default 2, at most 2" in size["description"]
