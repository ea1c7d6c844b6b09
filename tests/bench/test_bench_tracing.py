"""Request latency with OTLP export on and its collector down, beside export off.

Three phases through the Django test client (the whole stack): export off, then on with
its endpoint a port nobody listens on (the SDK's batch exporter failing in the background
all along), then off again, so a drift of the shared machine shows as a difference between
the two off phases. Each phase runs the same two requests: the floor (``GET`` of one
working-set item) and a small context pack (whose span carries the ``gen_ai.memory.*``
attributes). It prints and records the figures; it asserts no time.
"""

import pytest
from django.test import Client
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from contextops import tracing
from facts import services as fact_services
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.bench.measure import Series
from tests.bench.report import database_vendor, record, write_section
from tests.conftest import ApiClient
from tests.servers import free_port

ROUNDS = 300
WARM_UP = 10

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_tracing_with_the_collector_down(api):
    session = session_create(
        organization=api.organization, agent=api.agent, identity={"user_name": "Bench"}
    )
    root = frame_push(session=session, goal="Bench root", budget_total=10**9)
    handle_add(frame=root, kind="document", content="The spec of the feature.")
    fact_services.working_set_put(session=session, key="plan", value="the next three steps")
    floor_path = f"/sessions/{session.pk}/working-set/plan"
    pack_path = f"/sessions/{session.pk}/context-pack"

    def phase(client: ApiClient) -> dict[str, Series]:
        figures = {"floor": Series(), "pack": Series()}
        for round_ in range(WARM_UP + ROUNDS):
            measured = round_ >= WARM_UP
            for name, call in (
                ("floor", lambda: client.get(floor_path)),
                ("pack", lambda: client.post(pack_path, {"budget_tokens": 2_000})),
            ):
                (figures[name] if measured else Series()).timed(call)
        return figures

    def fresh() -> ApiClient:
        """A client whose middleware chain is built now (with or without tracing)."""
        return ApiClient(key=api.key, client=Client())

    off_before = phase(fresh())
    dead = f"http://127.0.0.1:{free_port()}/v1/traces"
    tracing.tracing_setup(exporter=OTLPSpanExporter(endpoint=dead, timeout=2))
    try:
        on_down = phase(fresh())
    finally:
        tracing.tracing_teardown()
    off_after = phase(fresh())

    phases = {
        "export off": off_before,
        "export on, collector down": on_down,
        "export off, again": off_after,
    }
    lines = [
        f"## OTLP export with the collector down ({database_vendor()})",
        "",
        "`make bench` (tests/bench/test_bench_tracing.py): the same requests through the Django",
        f"test client in three phases of {ROUNDS} rounds (after {WARM_UP} warm-up rounds each):",
        "export off; export on (`contextops.tracing`, the SDK's BatchSpanProcessor) with its",
        "endpoint a closed port, the exporter failing and retrying on its own thread; export off",
        "again. A request only queues its spans, so the middle phase should read as the others.",
        "",
        "| phase | floor p50 ms | floor p95 ms | pack p50 ms | pack p95 ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, figures in phases.items():
        floor, pack = figures["floor"], figures["pack"]
        lines.append(
            f"| {label} | {floor.p50:.2f} | {floor.p95:.2f} | {pack.p50:.2f} | {pack.p95:.2f} |"
        )
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    write_section(f"tracing-{database_vendor()}", report)
    record(
        {
            "tracing_collector_down": {
                label.replace(", ", "_").replace(" ", "_"): {
                    "floor_p50_ms": round(figures["floor"].p50, 3),
                    "pack_p50_ms": round(figures["pack"].p50, 3),
                }
                for label, figures in phases.items()
            }
        }
    )
