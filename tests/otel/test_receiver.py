"""POST /v1/traces: authentication, encodings, limits, re-sent spans, partial success and
what GenAI spans become. Bodies are made by the OpenTelemetry SDK's own encoder from
spans its tracer made."""

import base64
import gzip
import json

import pytest
from django.test import override_settings
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from contextops.tenancy import api_key_create
from frames.conversation.models import Turn
from frames.models import Event, Frame, Session, Usage
from frames.otel.models import ReceivedSpan

pytestmark = pytest.mark.django_db

PROTOBUF = "application/x-protobuf"


@pytest.fixture
def key():
    return api_key_create(org_name="Acme", agent_name="otel", authority="employee")[1]


@pytest.fixture
def tracer():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("tests"), exporter
    provider.shutdown()


def _body(exporter) -> bytes:
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def _json_body(exporter) -> dict:
    """The OTLP JSON mapping: protobuf's, with hex ids."""
    data = json_format.MessageToDict(encode_spans(exporter.get_finished_spans()))
    for rs in data["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    return data


def _post(client, body, key, *, path="/v1/traces", content_type=PROTOBUF, **headers):
    if key is not None:
        headers.setdefault("HTTP_AUTHORIZATION", f"Bearer {key}")
    return client.post(path, data=body, content_type=content_type, **headers)


def _answer(response) -> ExportTraceServiceResponse:
    message = ExportTraceServiceResponse()
    message.ParseFromString(response.content)
    return message


def _llm(tracer, name="chat gpt-4o", **attributes):
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 1000,
        "gen_ai.usage.output_tokens": 50,
        **attributes,
    }
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        return span


def test_it_takes_the_key_from_x_api_key_and_answers_an_empty_export_response(client, key, tracer):
    _llm(tracer[0])
    response = _post(client, _body(tracer[1]), None, HTTP_X_API_KEY=key)
    assert response.status_code == 200
    assert response["Content-Type"] == PROTOBUF
    assert not _answer(response).HasField("partial_success")
    assert Usage.objects.get().input_tokens == 1000


def test_it_answers_under_the_api_path_too(client, key, tracer):
    _llm(tracer[0])
    response = _post(client, _body(tracer[1]), key, path="/api/v1/otel/v1/traces")
    assert response.status_code == 200
    assert Usage.objects.count() == 1


@pytest.mark.parametrize(
    "headers, status, code",
    [
        ({}, 401, "unauthenticated"),
        ({"HTTP_AUTHORIZATION": "Bearer cops_nope_nope"}, 401, "unauthenticated"),
        ({"HTTP_AUTHORIZATION": "Basic abc"}, 401, "unauthenticated"),
    ],
)
def test_it_refuses_a_missing_or_wrong_key(client, tracer, headers, status, code):
    _llm(tracer[0])
    response = client.post("/v1/traces", data=_body(tracer[1]), content_type=PROTOBUF, **headers)
    assert (response.status_code, response.json()["error"]) == (status, code)
    assert not ReceivedSpan.objects.exists()


def test_a_read_only_key_is_refused_and_nothing_is_written(client, tracer):
    _, raw = api_key_create(org_name="Acme", agent_name="viewer", read_only=True)
    _llm(tracer[0])
    response = _post(client, _body(tracer[1]), raw)
    assert response.status_code == 403
    assert response.json()["error"] == "read_only_key"
    assert not Session.objects.exists() and not ReceivedSpan.objects.exists()


def test_a_gzip_json_body_is_read_and_answered_in_json(client, key, tracer):
    _llm(tracer[0])
    body = gzip.compress(json.dumps(_json_body(tracer[1])).encode())
    response = _post(
        client, body, key, content_type="application/json", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert Usage.objects.get().output_tokens == 50


@pytest.mark.parametrize(
    "body, content_type, headers, status, code",
    [
        (b"\xff\x00garbage", PROTOBUF, {}, 400, "bad_request"),
        (b"{not json", "application/json", {}, 400, "bad_request"),
        (b"[]", "application/json", {}, 400, "bad_request"),
        (b"not gzip", PROTOBUF, {"HTTP_CONTENT_ENCODING": "gzip"}, 400, "bad_request"),
        (b"x", PROTOBUF, {"HTTP_CONTENT_ENCODING": "br"}, 400, "bad_request"),
        (b"x", "text/plain", {}, 415, "unsupported_media_type"),
    ],
)
def test_a_body_that_is_no_trace_export_is_refused_clearly(
    client, key, body, content_type, headers, status, code
):
    response = _post(client, body, key, content_type=content_type, **headers)
    assert (response.status_code, response.json()["error"]) == (status, code)
    assert response.json()["detail"]
    assert not Session.objects.exists()


def test_a_get_is_not_allowed(client, key):
    response = client.get("/v1/traces", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 405 and response.json()["error"] == "method_not_allowed"


@override_settings(CONTEXTOPS_OTLP_MAX_BYTES=200)
def test_a_body_over_the_limit_is_413_with_the_limit(client, key, tracer):
    for _ in range(5):
        _llm(tracer[0])
    response = _post(client, _body(tracer[1]), key)
    assert response.status_code == 413
    assert response.json() == {
        "error": "too_large",
        "detail": response.json()["detail"],
        "limit": 200,
    }
    assert not Usage.objects.exists()


@override_settings(CONTEXTOPS_OTLP_MAX_DECODED_BYTES=1000)
def test_a_gzip_body_that_inflates_past_the_limit_is_413(client, key):
    response = _post(client, gzip.compress(b"\x00" * 5000), key, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413 and response.json()["limit"] == 1000


@override_settings(CONTEXTOPS_OTLP_MAX_SPANS=2)
def test_more_spans_than_the_limit_is_413_naming_the_batch_size(client, key, tracer):
    for _ in range(3):
        _llm(tracer[0])
    response = _post(client, _body(tracer[1]), key)
    assert response.status_code == 413
    assert response.json()["limit"] == 2
    assert "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" in response.json()["detail"]
    assert not ReceivedSpan.objects.exists()


def test_a_span_sent_again_is_counted_once(client, key, tracer):
    _llm(tracer[0])
    body = _body(tracer[1])
    assert _post(client, body, key).status_code == 200
    assert _post(client, body, key).status_code == 200
    session = Session.objects.get()
    assert session.api_calls_total == 1
    assert Usage.objects.count() == 1 and ReceivedSpan.objects.count() == 1


def test_spans_with_bad_ids_are_rejected_the_otlp_way_and_the_rest_kept(client, key, tracer):
    _llm(tracer[0])
    _llm(tracer[0])
    data = _json_body(tracer[1])
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = "00ff"  # two bytes, not eight
    response = _post(client, json.dumps(data), key, content_type="application/json")
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "span id must be 8 bytes" in partial["errorMessage"]
    assert Usage.objects.count() == 1


def test_a_trace_refused_by_our_rules_is_rejected_with_the_reason(client, key, tracer):
    _llm(tracer[0], **{"gen_ai.conversation.id": "closed"})
    assert _post(client, _body(tracer[1]), key).status_code == 200
    Session.objects.update(lifecycle_state=Session.Lifecycle.ENDED)
    tracer[1].clear()
    _llm(tracer[0], **{"gen_ai.conversation.id": "closed"})
    answer = _answer(_post(client, _body(tracer[1]), key))
    assert answer.partial_success.rejected_spans == 1
    assert "ended" in answer.partial_success.error_message
    assert ReceivedSpan.objects.count() == 1


def test_deprecated_and_current_usage_names_both_map_and_cached_input_is_split_out(
    client, key, tracer
):
    _llm(
        tracer[0],
        **{
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.cache_read.input_tokens": 900,
            "gen_ai.usage.cache_creation.input_tokens": 100,
        },
    )
    old = {
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.usage.prompt_tokens": 700,
        "gen_ai.usage.completion_tokens": 30,
        "gen_ai.usage.cache_read_input_tokens": 500,
        "gen_ai.usage.cache_creation_input_tokens": 100,
    }
    with tracer[0].start_as_current_span("anthropic.chat", attributes=old):
        pass
    assert _post(client, _body(tracer[1]), key).status_code == 200
    figures = [
        (
            u.model,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens,
        )
        for u in Usage.objects.order_by("started_at")
    ]
    assert figures == [("gpt-4o", 200, 50, 900, 100), ("claude-sonnet-4-5", 100, 30, 500, 100)]


def test_unknown_attributes_and_events_are_kept(client, key, tracer):
    tracer_, exporter = tracer
    with tracer_.start_as_current_span(
        "chat gpt-4o",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 2,
            "gen_ai.usage.reasoning.output_tokens": 7,
            "gen_ai.usage.some_future_kind": 3,
            "vendor.tags": ["a", "b"],
            "vendor.ratio": 0.5,
        },
    ) as span:
        span.add_event("vendor.checkpoint", {"step": 2})
    assert _post(client, _body(exporter), key).status_code == 200
    kept = ReceivedSpan.objects.get()
    assert kept.attributes["gen_ai.usage.reasoning.output_tokens"] == 7
    assert kept.attributes["gen_ai.usage.some_future_kind"] == 3
    assert kept.attributes["vendor.tags"] == ["a", "b"] and kept.attributes["vendor.ratio"] == 0.5
    assert kept.events[0]["name"] == "vendor.checkpoint"
    assert kept.events[0]["attributes"] == {"step": 2}
    assert kept.scope["name"] == "tests"
    assert Usage.objects.get().input_tokens == 10


def test_agent_spans_nest_as_frames_and_tool_spans_are_tool_calls_with_results(client, key, tracer):
    tracer_, exporter = tracer
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with tracer_.start_as_current_span(
        "invoke_agent planner", attributes={**agent, "gen_ai.agent.name": "planner"}
    ):
        with tracer_.start_as_current_span(
            "invoke_agent researcher", attributes={**agent, "gen_ai.agent.name": "researcher"}
        ):
            _llm(
                tracer_,
                **{
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": "Find it"}]}]
                    ),
                    "gen_ai.output.messages": json.dumps(
                        [
                            {
                                "role": "assistant",
                                "parts": [
                                    {
                                        "type": "tool_call",
                                        "id": "call_1",
                                        "name": "search",
                                        "arguments": {"q": "it"},
                                    }
                                ],
                            }
                        ]
                    ),
                },
            )
            with tracer_.start_as_current_span(
                "execute_tool search",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.id": "call_1",
                    "gen_ai.tool.call.arguments": '{"q": "it"}',
                    "gen_ai.tool.call.result": "found it",
                },
            ):
                pass
            with tracer_.start_as_current_span(
                "execute_tool fetch",
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch"},
            ) as failing:
                failing.set_status(Status(StatusCode.ERROR, "timed out"))
        with tracer_.start_as_current_span("invoke_agent writer", attributes=agent) as writer:
            writer.set_status(Status(StatusCode.ERROR, "gave up"))
    assert _post(client, _body(exporter), key).status_code == 200

    session = Session.objects.get()
    assert session.title == "planner"  # per trace: no conversation id was sent
    assert session.source["kind"] == "otel" and len(session.source["trace_id"]) == 32
    frames = {f.goal: f for f in Frame.objects.filter(session=session)}
    root = next(f for f in frames.values() if f.parent_id is None)
    assert frames["planner"].parent_id == root.pk
    assert frames["researcher"].parent_id == frames["planner"].pk
    assert frames["invoke_agent writer"].status == Frame.Status.FAILED
    assert frames["invoke_agent writer"].failure_reason == "gave up"
    assert frames["researcher"].status == Frame.Status.COMPLETED
    assert Usage.objects.get().frame_id == frames["researcher"].pk
    # the researcher's used settled into the planner's when it closed
    frames["planner"].refresh_from_db()
    assert frames["planner"].budget_used == 1050
    turn = Turn.objects.get(session=session)
    assert turn.tool_calls == [
        {"id": "call_1", "name": "search", "input": {"q": "it"}},
        {"id": turn.tool_calls[1]["id"], "name": "fetch", "input": {}},
    ]
    assert turn.tool_results[0] == {
        "tool_use_id": "call_1",
        "output": "found it",
        "is_error": False,
    }
    assert turn.tool_results[1]["is_error"] is True
    assert "timed out" in turn.tool_results[1]["output"]
    assert Event.objects.filter(session=session, type="frame.popped").count() == 3
