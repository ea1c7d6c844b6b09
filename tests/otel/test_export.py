"""Our own work as OpenTelemetry spans: with export on, a context pack, a fact write, a
compaction and an approval reach an OTLP collector with the GenAI attribute names; with
the collector down, requests still succeed; with export off, nothing is in the chain."""

import logging

import pytest
from django.test import Client
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from contextops import tracing
from contextops.llm import ExtractiveSummarizer
from frames.conversation.compaction import compaction_execute
from frames.models import token_hash
from tests.conftest import ApiClient
from tests.otel.collector import Collector
from tests.servers import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def collector():
    with Collector() as running:
        provider = tracing.tracing_setup(endpoint=running.endpoint)
        try:
            yield running, provider
        finally:
            tracing.tracing_teardown()


def _agent(make_api) -> ApiClient:
    return make_api()


def _messages(api, session_id, count):
    for i in range(count):
        response = api.post(
            f"/sessions/{session_id}/messages",
            {
                "messages": [
                    {"role": "user", "content": f"Step {i}: build part {i} of the feature"},
                    {
                        "role": "assistant",
                        "content": [{"type": "text", "text": f"Built part {i}."}],
                    },
                ]
            },
        )
        assert response.status_code == 200, response.content


def test_a_pack_a_fact_a_compaction_and_an_approval_are_spans_at_the_collector(
    collector, make_api, start_session, push_ok, suspend_ok, approver_client
):
    running, provider = collector
    api = _agent(make_api)  # its client's middleware chain is built with export on
    session = start_session(api)
    frame = push_ok(session["id"], 20_000, client=api, goal="Build the feature")
    api.post(f"/frames/{frame['id']}/handles", {"kind": "document", "content": "The spec."})
    assert (
        api.post(
            "/facts", {"key": "deploy.region", "value": "eu-west-1", "source": "ops"}
        ).status_code
        == 201
    )
    pack = api.post(f"/sessions/{session['id']}/context-pack", {"budget_tokens": 2_000})
    assert pack.status_code == 200
    _messages(api, session["id"], 6)
    queued = api.post(f"/sessions/{session['id']}/compactions", {"strategy": "anchor_point"})
    assert queued.status_code == 202, queued.content
    compaction_execute(run_id=queued.json()["id"], summarizer=ExtractiveSummarizer())
    child = push_ok(session["id"], 1_000, parent=frame["id"], client=api, goal="Refund")
    suspension = suspend_ok(
        child["id"], reason="Refund over 500", requires_approval=True, client=api
    )
    decided = approver_client.post(
        f"/inbox/{child['id']}/{token_hash(suspension['token'])}/approve/", {"note": "ok"}
    )
    assert decided.status_code in (200, 302)
    assert provider.force_flush()

    (memory,) = running.named("search_memory")
    assert memory.attributes["gen_ai.operation.name"] == "search_memory"
    assert memory.attributes["gen_ai.conversation.id"] == session["id"]
    body = pack.json()
    returned = len(body["facts"]) + len(body["working_set"]) + len(body["segments"])
    assert memory.attributes["gen_ai.memory.search.result.count"] == returned > 0
    assert memory.attributes["gen_ai.memory.budget_tokens"] == 2_000
    assert memory.attributes["gen_ai.memory.used_tokens"] == body["token_summary"]["used"]
    assert (
        memory.attributes["gen_ai.memory.compaction_level"]
        == body["token_summary"]["compaction_level"]
    )
    assert memory.scope == "contextops" and memory.resource["service.name"] == "contextops"

    (fact,) = running.named("update_memory")
    assert fact.attributes["gen_ai.operation.name"] == "update_memory"
    assert fact.attributes["gen_ai.memory.record.id"] == "deploy.region"
    assert fact.attributes["gen_ai.memory.update.outcome"] == "created"

    (compaction,) = running.named("compaction")
    assert compaction.attributes["gen_ai.conversation.id"] == session["id"]
    assert compaction.attributes["contextops.compaction.status"] == "completed"
    assert (
        compaction.attributes["contextops.compaction.original_tokens"]
        > compaction.attributes["contextops.compaction.final_tokens"]
    )

    (approval,) = running.named("approval")
    assert approval.attributes["contextops.approval.decision"] == "approved"
    assert approval.attributes["contextops.approval.decided_by"] == "grace"
    assert approval.attributes["contextops.frame.id"] == child["id"]

    requests = [s for s in running.spans if s.attributes.get("http.route")]
    routes = {s.attributes["http.route"] for s in requests}
    assert "/api/v1/sessions/{session_id}/context-pack" in routes
    assert all(s.attributes["http.response.status_code"] < 400 for s in requests)


def test_with_the_collector_down_requests_still_succeed_and_a_log_line_says_why(
    make_api, start_session, push_ok, caplog
):
    caplog.set_level(logging.WARNING, logger="opentelemetry")
    dead = f"http://127.0.0.1:{free_port()}/v1/traces"
    provider = tracing.tracing_setup(exporter=OTLPSpanExporter(endpoint=dead, timeout=1))
    try:
        api = _agent(make_api)
        session = start_session(api)
        push_ok(session["id"], 5_000, client=api)
        pack = api.post(f"/sessions/{session['id']}/context-pack", {"budget_tokens": 1_000})
        assert pack.status_code == 200
        provider.force_flush(timeout_millis=10_000)
    finally:
        tracing.tracing_teardown()
    # the cost of the dead collector: log lines of the exporter, on its own thread
    assert any(r.name.startswith("opentelemetry.exporter") for r in caplog.records)


def test_with_export_off_nothing_is_traced_and_no_middleware_runs(make_api, start_session):
    assert not tracing.tracing_on()
    with tracing.span("anything", {"a": 1}) as current:
        assert current is None
    client = Client()
    client.get("/healthz")
    names = [m.__class__.__name__ for m in _chain(client)]
    assert "TracingMiddleware" not in names


def _chain(client):
    """The middleware instances of ``client``'s handler, outermost first."""
    handler = client.handler
    found, current = [], handler._middleware_chain
    while current is not None and hasattr(current, "get_response"):
        found.append(current)
        current = current.get_response
    return found


def test_a_service_adds_to_the_current_span_in_one_line(collector):
    running, provider = collector
    with tracing.span("search_memory", {"gen_ai.operation.name": "search_memory"}):
        tracing.current_span_set({"gen_ai.memory.candidates.count": 12, "ignored": None})
    assert provider.force_flush()
    (span,) = running.named("search_memory")
    assert span.attributes == {
        "gen_ai.operation.name": "search_memory",
        "gen_ai.memory.candidates.count": 12,
    }
