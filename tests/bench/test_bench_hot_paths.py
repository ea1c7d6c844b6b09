"""The hot paths beside the floor, in one run: the figures of docs/benchmarks.json.

The floor is the cheapest authenticated request an agent makes: ``GET`` of one
working-set item (API key, session, item). Beside it, through the same Django test client
and in the same rounds (each round runs every operation once, so a busy moment of a shared
machine touches them alike): push a child frame, pop it, record one model call's usage, and
assemble a context pack in the large case (10,000 valid facts behind 50,000 superseded
versions, a frame of 1,000 handles). Ratios are p50 over the floor's p50 of this run.

Queries are counted as the CI tests count them (transaction control left out): per request,
and, for the writes, inside the write's transaction, which is what
tests/frames/test_write_queries.py bounds at the service. The benchmark asserts those
bounds and that no count moves between rounds (but for the API key's once-a-minute
``last_used_at`` stamp); it asserts no time.
"""

import pytest
from django.db import connection

from facts import services as fact_services
from frames.models import ContextHandle, Frame
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.bench.measure import Series
from tests.bench.report import database_vendor, record, write_section
from tests.bench.test_bench_context_pack import HANDLES, QUERY, _add_facts, _handles
from tests.frames.test_write_queries import POP, PUSH, USAGE

ROUNDS = 200
WARM_UP = 5
VALID, SUPERSEDED = 10_000, 50_000
# The bounds of tests/frames/test_write_queries.py (the write's transaction) and of
# tests/context/test_context_pack_queries.py (the whole request), this engine's.
WRITE_BOUNDS = {"push": PUSH, "pop": POP, "usage_record": USAGE}
PACK_BOUND = 7 if connection.vendor == "postgresql" else 8  # governing facts: one read more
PACK_VS_FLOOR, WRITE_VS_FLOOR = 5, 2

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_hot_paths(api):
    org = api.organization
    session = session_create(
        organization=org,
        agent=api.agent,
        identity={"user_name": "Bench", "authority": "employee"},
        environment={"timezone": "UTC"},
        title="bench",
    )
    root = frame_push(session=session, goal="Bench root", budget_total=10**12)
    _handles(session, root, HANDLES)
    assert ContextHandle.objects.filter(frame=root).count() == HANDLES
    _add_facts(org, 0, VALID, SUPERSEDED)
    fact_services.working_set_put(session=session, key="plan", value="the next three steps")

    series = {name: Series() for name in ("floor", "push", "pop", "usage_record", "pack")}
    floor_path = f"/sessions/{session.pk}/working-set/plan"
    pack_body = {"budget_tokens": 8_000, "query": QUERY}

    def one_round(measure: bool) -> None:
        def run(name, call):
            target = series[name] if measure else Series()
            return target.timed(call)

        run("floor", lambda: api.get(floor_path))
        pushed = run(
            "push",
            lambda: api.post(
                f"/sessions/{session.pk}/frames",
                {"goal": "Bench push", "parent_frame_id": str(root.pk), "budget": {"total": 100}},
            ),
        ).json()["id"]
        run("pop", lambda: api.post(f"/frames/{pushed}/pop", {"status": "completed"}))
        run(
            "usage_record",
            lambda: api.post(f"/frames/{root.pk}/usage", {"input_tokens": 10, "output_tokens": 5}),
        )
        run("pack", lambda: api.post(f"/sessions/{session.pk}/context-pack", pack_body))

    for _ in range(WARM_UP):  # first use of the key stamps last_used_at; caches fill
        one_round(measure=False)
    for _ in range(ROUNDS):
        one_round(measure=True)
    assert Frame.objects.filter(session=session).count() == 1 + WARM_UP + ROUNDS

    for name, bound in WRITE_BOUNDS.items():
        assert max(series[name].write_counts) <= bound, (name, series[name].write_counts[-1])
    # the pack's own count (the key's stamp, one more, may fall in any round: checked below)
    assert series["pack"].queries <= PACK_BOUND, series["pack"].queries
    for name, s in series.items():
        # the key's once-a-minute last_used_at stamp is the one statement a request may add
        assert s.most_queries <= s.queries + 1, f"{name}: the query count moved between rounds"

    floor = series["floor"].p50
    labels = {
        "floor": "floor: `GET /sessions/{id}/working-set/{key}`",
        "push": "push: `POST /sessions/{id}/frames` (a child of the root)",
        "pop": "pop: `POST /frames/{id}/pop`",
        "usage_record": "usage record: `POST /frames/{id}/usage`",
        "pack": "context pack, large case: `POST /sessions/{id}/context-pack`",
    }
    bounds = {**WRITE_BOUNDS, "pack": PACK_BOUND}
    lines = [
        f"## Hot paths beside the floor ({database_vendor()})",
        "",
        "`make bench` (tests/bench/test_bench_hot_paths.py), through the Django test client (the",
        "whole stack: middleware, API-key auth, rate limit, validation, serialization). The floor",
        "is an authenticated `GET` of one working-set item. Each of "
        f"{ROUNDS} rounds (after {WARM_UP} warm-up",
        "rounds) runs every row once, in this order, so the ratios compare p50s of the same run.",
        f"The pack's session holds {VALID:,} valid facts behind {SUPERSEDED:,} superseded versions and",
        f"a frame of {HANDLES:,} handles; budget 8,000 tokens, query {QUERY!r}.",
        "",
        "*queries* are the request's statements, *in the write* those inside its transaction (what",
        "tests/frames/test_write_queries.py bounds at the service), transaction control left out.",
        "",
        "| operation | p50 ms | p95 ms | × floor (p50) | target | queries | in the write | bound |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in series.items():
        target = (
            "" if name == "floor" else f"≤ {PACK_VS_FLOOR if name == 'pack' else WRITE_VS_FLOOR}"
        )
        write = "" if name in ("floor", "pack") else str(s.write_queries)
        bound = bounds.get(name, "")
        lines.append(
            f"| {labels[name]} | {s.p50:.2f} | {s.p95:.2f} | {s.p50 / floor:.2f} | {target} |"
            f" {s.queries} | {write} | {'≤ ' + str(bound) if bound else ''} |"
        )
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    write_section(f"hot-paths-{database_vendor()}", report)

    def figure(name: str) -> dict:
        s = series[name]
        out = {"p50_ms": round(s.p50, 3), "queries": s.queries, "vs_floor": round(s.p50 / floor, 3)}
        if name != "pack":
            out["write_queries"] = s.write_queries
        return out

    record(
        {
            "floor_p50_ms": round(floor, 3),
            "push": figure("push"),
            "pop": figure("pop"),
            "usage_record": figure("usage_record"),
            "context_pack_large": figure("pack"),
        }
    )
