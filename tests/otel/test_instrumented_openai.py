"""The OTLP receiver against the real thing: the OpenAI SDK instrumented by the official
GenAI instrumentation (opentelemetry-instrumentation-openai-v2), its spans sent by the
OpenTelemetry SDK's OTLP/HTTP exporters (protobuf and JSON) to a live server, compared
with what the client's OpenAI wrapper records for the same calls."""

import json

import openai
import pytest
from contextops_client import Client
from contextops_client.openai import wrap
from opentelemetry.exporter.otlp.json.http.trace_exporter import (
    OTLPSpanExporter as JsonSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as ProtobufSpanExporter,
)
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from contextops.tenancy import api_key_create
from frames.conversation.models import Turn
from frames.models import Frame, ModelPrice, Session, Usage
from frames.otel.models import ReceivedSpan
from frames.selectors import session_cost
from tests.fakes.openai_server import OpenAIFakeServer, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("live")]

USAGE = {"prompt_tokens": 1200, "completion_tokens": 40}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
def key(live_server):
    _, raw = api_key_create(org_name="Acme", agent_name="otel-tests", authority="employee")
    return raw


@pytest.fixture(autouse=True)
def priced(db):
    """gpt-4o's prices (a transactional test empties the table the migrations filled)."""
    ModelPrice.objects.update_or_create(
        model="gpt-4o",
        defaults={
            "provider": "openai",
            "input_per_mtok": 2.5,
            "output_per_mtok": 10,
            "cache_read_per_mtok": 1.25,
        },
    )


@pytest.fixture
def fake():
    with OpenAIFakeServer() as server:
        yield server


@pytest.fixture
def content_captured(monkeypatch):
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")


def _script(fake):
    fake.script(
        Reply.message(
            "",
            tool_calls=[{"id": "call_paris", "name": "weather", "arguments": '{"city": "Paris"}'}],
            usage=USAGE,
        ),
        Reply.message("Paris is sunny.", usage={"prompt_tokens": 1300, "completion_tokens": 12}),
    )


def _conversation(sdk):
    """Two calls of a tool-using chat, as an agent makes them."""
    history = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    first = sdk.chat.completions.create(model="gpt-4o", messages=history, tools=[WEATHER_TOOL])
    history += [
        first.choices[0].message,
        {"role": "tool", "tool_call_id": "call_paris", "content": "sunny, 24 C"},
    ]
    sdk.chat.completions.create(model="gpt-4o", messages=history, tools=[WEATHER_TOOL])


def _figures(session_id):
    return [
        (
            u.model,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens,
        )
        for u in Usage.objects.filter(session_id=session_id).order_by("created_at", "id")
    ]


def _wrapper_records(live_server, key, fake):
    ops = Client(live_server.url, key, retries=1, backoff=0.01)
    sdk = openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
    try:
        session = ops.session(model="gpt-4o")
        with ops.frame(session, goal="Weather", budget=50_000):
            _conversation(wrap(sdk, ops, session))
        return session.id
    finally:
        sdk.close()
        ops.close()


@pytest.fixture
def traced(live_server, key, fake, request):
    """Instrumented OpenAI calls inside an agent span, exported to the live server."""
    exporter_class, compression = request.param
    provider = TracerProvider()
    exporter = exporter_class(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {key}"},
        compression=compression,
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    sdk = openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
    tracer = provider.get_tracer("weather-agent")

    def run(conversation_id: str) -> None:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather",
            "gen_ai.conversation.id": conversation_id,
        }
        with tracer.start_as_current_span("invoke_agent weather", attributes=attributes):
            _conversation(sdk)
        assert provider.force_flush()

    try:
        yield run
    finally:
        instrumentor.uninstrument()
        sdk.close()
        provider.shutdown()


EXPORTERS = [
    pytest.param((ProtobufSpanExporter, Compression.Gzip), id="protobuf-gzip"),
    pytest.param((JsonSpanExporter, None), id="json"),
]


@pytest.mark.parametrize("traced", EXPORTERS, indirect=True)
def test_instrumented_calls_become_what_the_wrapper_records(
    live_server, key, fake, content_captured, traced
):
    _script(fake)
    wrapped = _wrapper_records(live_server, key, fake)
    _script(fake)
    traced("conversation-42")

    session = Session.objects.get(source={"kind": "otel", "conversation_id": "conversation-42"})
    assert session.title == "weather"
    # the same model calls, usage and cost as the wrapper's for the same calls
    assert _figures(session.pk) == _figures(wrapped)
    assert _figures(session.pk) == [("gpt-4o", 1200, 40, 0, 0), ("gpt-4o", 1300, 12, 0, 0)]
    assert session_cost(session).usd == session_cost(Session.objects.get(pk=wrapped)).usd > 0
    # the agent span is a frame under the conversation's root, closed with the span
    agent = Frame.objects.get(session=session, goal="weather")
    assert agent.parent.parent is None and agent.status == Frame.Status.COMPLETED
    calls = list(Usage.objects.filter(session=session).order_by("created_at"))
    assert {u.frame_id for u in calls} == {agent.pk}
    assert all(u.latency_ms is not None and u.started_at is not None for u in calls)
    # each call known by its response's id, as the wrapper knows it
    spans = ReceivedSpan.objects.filter(session=session, kind="model_call").order_by("started_at")
    assert [u.message_id for u in calls] == [s.attributes["gen_ai.response.id"] for s in spans]
    assert [s.usage_id for s in spans] == [u.pk for u in calls]

    # the captured content: the same turns, tool call and result as the wrapper's
    def turns(session_id):
        return [
            (t.user_message, t.assistant_response, t.tool_calls, t.tool_results)
            for t in Turn.objects.filter(session_id=session_id).order_by("index")
        ]

    assert turns(session.pk) == turns(wrapped)
    assert turns(session.pk)[0][2] == [
        {"id": "call_paris", "name": "weather", "input": {"city": "Paris"}}
    ]
    # every span kept, with the attributes we do not read
    kinds = sorted(ReceivedSpan.objects.filter(session=session).values_list("kind", flat=True))
    assert kinds == ["agent", "model_call", "model_call"]
    call = ReceivedSpan.objects.filter(session=session, kind="model_call").first()
    assert call.attributes["openai.response.system_fingerprint"] == "fp_fake"
    assert json.loads(call.attributes["gen_ai.input.messages"])[0]["role"] == "system"


@pytest.mark.parametrize("traced", EXPORTERS[:1], indirect=True)
def test_the_same_conversation_in_two_traces_is_one_session(
    live_server, key, fake, content_captured, traced
):
    _script(fake)
    traced("conversation-7")
    _script(fake)
    traced("conversation-7")
    session = Session.objects.get(source={"kind": "otel", "conversation_id": "conversation-7"})
    assert session.api_calls_total == 4
    assert Frame.objects.filter(session=session, goal="weather").count() == 2
