"""POST /sessions/{id}/context-pack and the stored records."""

import json
import uuid
import zlib

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from contextops.rows import param
from facts import services as fact_services
from facts.selectors.ranking import ContextFact
from frames.context import pack as context_pack
from frames.context.schemas import ContextPackOut
from frames.models import ContextPackRecord, Session
from frames.models.context import SCORE_PARTS, json_decompressed


def stub_fact(
    pk: int,
    key: str,
    value: str,
    tokens: int,
    is_constraint: bool = False,
    source: str = "user",
    scope: str = "global",
) -> ContextFact:
    """A fact as the facts selector returns it, for tests that only need facts there."""
    return ContextFact(
        id=pk,
        key=key,
        subject="",
        stored_value=value,
        tokens=tokens,
        is_constraint=is_constraint,
        memory_type="",
        source=source,
        scope=scope,
    )


@pytest.fixture
def stub_facts(monkeypatch):
    facts: list[ContextFact] = []

    def facts_for_context(*, organization, session=None, scope_ids=(), query="", limit=50, **_):
        return facts[:limit]

    monkeypatch.setattr(context_pack, "facts_for_context", facts_for_context)
    return facts


def test_it_assembles_a_pack_within_the_budget(api, session, frame, make_frame, make_handle):
    child = make_frame(session, parent=frame, goal="Read the contract")
    system = make_handle(
        child, "You are careful.", tokens=5, kind="system_prompt", priority="critical"
    )
    doc = make_handle(child, "The contract says 30 days.", tokens=8)
    response = api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 1000})
    assert response.status_code == 200, response.content
    body = response.json()
    summary = body["token_summary"]
    assert summary["budget"] == 1000
    assert summary["used"] <= 1000
    assert sum(summary["breakdown"].values()) == summary["used"]
    assert summary["remaining"] == 1000 - summary["used"]
    assert summary["compaction_level"] == "none"
    assert "Ada" in body["brief_context"] and "Europe/Paris" in body["brief_context"]
    assert [b["goal"] for b in body["breadcrumbs"]] == ["Investigate", "Read the contract"]
    assert [s["handle_id"] for s in body["segments"]] == [str(system.id), str(doc.id)]
    assert body["segments"][1]["content"] == "The contract says 30 days."
    record = ContextPackRecord.objects.get(pk=body["id"])
    assert (record.used, record.level, record.frame_id) == (summary["used"], "none", child.id)


@pytest.mark.parametrize("budget", [0, 1, 499])
def test_it_refuses_a_budget_under_500(api, session, frame, budget):
    response = api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": budget})
    assert response.status_code == 422
    assert response.json()["error"] == "budget_too_small"
    assert not ContextPackRecord.objects.exists()


def test_it_answers_422_for_bad_input(api, session):
    assert (
        api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": "lots"}).status_code
        == 422
    )
    assert (
        api.post(
            f"/sessions/{session.id}/context-pack", {"budget_tokens": 900, "min_compaction": "max"}
        ).status_code
        == 422
    )
    assert (
        api.post(
            f"/sessions/{session.id}/context-pack", {"budget_tokens": 900, "query": "x" * 2001}
        ).status_code
        == 422
    )


@pytest.mark.parametrize(
    ("field", "shown"),
    [
        ("budget_tokens", str),
        ("budget_tokens", float),
        ("budget_tokens", bool),
        ("as_of_seq", str),
        ("as_of_seq", float),
    ],
)
def test_a_number_given_as_another_type_is_refused_naming_the_field(
    api, start_session, push_ok, field, shown
):
    session = start_session()
    push_ok(session["id"], 100_000)
    seq = Session.objects.values_list("last_event_seq", flat=True).get(pk=session["id"])
    url = f"/sessions/{session['id']}/context-pack"
    body = {"budget_tokens": 4000, "as_of_seq": seq}
    response = api.post(url, {**body, field: shown(body[field])})
    assert response.status_code == 422, response.content
    error = response.json()
    assert error["error"] == "validation_error" and error["detail"]
    assert [e["loc"] for e in error["errors"]] == [["body", field]]
    assert not ContextPackRecord.objects.exists()
    assert api.post(url, body).status_code == 200  # the same figures as numbers are taken


def test_the_schema_states_the_budget_the_api_accepts(api):
    schemas = api.client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    budget = schemas["ContextPackIn"]["properties"]["budget_tokens"]
    assert (budget["type"], budget["minimum"], budget["maximum"]) == (
        "integer",
        context_pack.packing.MIN_BUDGET,
        10_000_000,
    )


def test_an_included_handle_the_frame_does_not_hold_is_refused_and_nothing_stored(
    api, session, frame, make_frame, make_handle
):
    mine = make_handle(frame, "mine", tokens=10)
    sibling = make_frame(session, parent=frame, goal="Other")
    elsewhere = make_handle(sibling, "the child's", tokens=10)
    for named in (str(uuid.uuid4()), str(elsewhere.id)):
        response = api.post(
            f"/sessions/{session.id}/context-pack",
            {"frame_id": str(frame.id), "budget_tokens": 600, "include_handles": [named]},
        )
        assert response.status_code == 422, response.content
        body = response.json()
        assert body["errors"][0]["loc"] == ["body", "include_handles"]
        assert named in body["errors"][0]["msg"]
    assert not ContextPackRecord.objects.filter(session=session).exists()
    forced = api.post(
        f"/sessions/{session.id}/context-pack",
        {"frame_id": str(frame.id), "budget_tokens": 600, "include_handles": [str(mine.id)]},
    ).json()
    assert [s["reason"] for s in forced["segments"]] == ["forced"]


def test_it_forces_includes_leaves_out_excludes_and_always_keeps_critical(
    api, session, frame, make_handle
):
    critical = make_handle(frame, "system", tokens=50, priority="critical")
    forced = make_handle(frame, "forced " * 200, tokens=300, priority="background")
    excluded = make_handle(frame, "excluded", tokens=10, priority="high")
    filler = [make_handle(frame, "filler " * 300, tokens=400, priority="low") for _ in range(5)]
    cold = make_handle(frame, "cold", tokens=5, state="cold")
    offline = make_handle(frame, "offline", tokens=5, state="offline", priority="critical")
    response = api.post(
        f"/sessions/{session.id}/context-pack",
        {
            "budget_tokens": 900,
            "include_handles": [str(forced.id)],
            "exclude_handles": [str(excluded.id)],
        },
    )
    body = response.json()
    segment_ids = [s["handle_id"] for s in body["segments"]]
    assert str(critical.id) in segment_ids and str(forced.id) in segment_ids
    assert str(excluded.id) not in segment_ids and str(cold.id) not in segment_ids
    assert str(offline.id) not in segment_ids
    reasons = {d["id"]: (d["reason"], d["level"]) for d in body["dropped"]}
    assert reasons[str(excluded.id)][0] == "excluded"
    assert reasons[str(cold.id)][0] == "cold"
    assert reasons[str(offline.id)][0] == "offline"
    # The room left after the required items holds one filler whole (the newest) and
    # an excerpt of the next (the rest of the room); the others fit in no form and are
    # dropped, each tried in turn.
    filler_ids = {str(h.id) for h in filler}
    fillers = [s for s in body["segments"] if s["handle_id"] in filler_ids]
    assert [(s["handle_id"], s["form"]) for s in fillers] == [
        (str(filler[-1].id), "full"),
        (str(filler[-2].id), "excerpt"),
    ]
    assert fillers[1]["content"].startswith("filler filler") and fillers[1]["tokens"] < 400
    assert all(reasons[str(h.id)] == ("over_budget", "none") for h in filler[:-2])
    assert body["token_summary"]["compaction_level"] == "moderate"
    assert 900 - 3 <= body["token_summary"]["used"] <= 900  # to within a word


def test_it_starts_at_min_compaction_and_uses_stored_summaries(api, session, frame, make_handle):
    handle = make_handle(frame, "long text " * 100, tokens=250, summary="Short.", summary_tokens=2)
    body = api.post(
        f"/sessions/{session.id}/context-pack",
        {"budget_tokens": 5000, "min_compaction": "aggressive"},
    ).json()
    # Its summary is the deepest form used: moderate, though packing started at aggressive.
    assert body["token_summary"]["compaction_level"] == "moderate"
    assert body["segments"] == [
        {
            "handle_id": str(handle.id),
            "kind": "document",
            "priority": "medium",
            "state": "loaded",
            "form": "summary",
            "content": "Short.",
            "tokens": 2,
            "rank": 1,
            "score": {
                "total": 0.6,
                "priority": 0.5,
                "lexical": 0.0,
                "semantic": 0.0,
                "recency": 0.1,
                "attention": 0.0,
                "neighbour": 0.0,
                "older": 0.0,
            },
            "reason": "ranked",
            "older_than": None,
        }
    ]


def test_compaction_level_is_the_deepest_form_used_not_the_pressure_formats_floor(
    api, make_session, make_frame, make_handle
):
    session = make_session(pressure_level="high")  # ultra_dense: packing starts at moderate
    frame = make_frame(session)
    make_handle(frame, "Spaced    out    text.", tokens=8)
    url = f"/sessions/{session.id}/context-pack"
    light = api.post(url, {"budget_tokens": 4000}).json()
    assert light["format"] == "ultra_dense"
    assert [s["form"] for s in light["segments"]] == ["light"]
    assert light["token_summary"]["compaction_level"] == "light"
    assert ContextPackRecord.objects.get(pk=light["id"]).level == "light"

    make_handle(
        frame, "paged " * 50, tokens=75, state="indexed", summary="Paged.", summary_tokens=2
    )
    summary = api.post(url, {"budget_tokens": 4000}).json()
    assert sorted(s["form"] for s in summary["segments"]) == ["light", "summary"]
    assert summary["token_summary"]["compaction_level"] == "moderate"
    assert ContextPackRecord.objects.get(pk=summary["id"]).level == "moderate"


def test_ranks_start_at_1_in_ranking_order_and_required_items_carry_none(
    api, member_client, session, frame, make_frame, make_handle
):
    child = make_frame(session, parent=frame, goal="Read the contract")
    critical = make_handle(child, "You are careful.", tokens=5, priority="critical")
    forced = make_handle(child, "Asked for.", tokens=5, priority="low")
    for i in range(8):
        make_handle(child, f"Document {i}. " * 40, tokens=120)
    url = f"/sessions/{session.id}/context-pack"
    body = api.post(url, {"budget_tokens": 600, "include_handles": [str(forced.id)]}).json()
    required = {s["handle_id"]: s["rank"] for s in body["segments"] if s["reason"] != "ranked"}
    assert required == {str(critical.id): None, str(forced.id): None}
    ranked = [s["rank"] for s in body["segments"] if s["reason"] == "ranked"]
    dropped = [d["rank"] for d in body["dropped"]]
    assert ranked and dropped and None not in ranked + dropped
    assert sorted(ranked + dropped) == list(range(1, len(ranked) + len(dropped) + 1))
    assert ranked == sorted(ranked) and ranked[0] == 1  # the best-ranked went in first

    record = ContextPackRecord.objects.get(pk=body["id"])
    stored = {(i["section"], i["id"]): i["rank"] for i in record.included}
    assert stored[("breadcrumbs", str(child.id))] is None
    assert stored[("segments", str(critical.id))] is None
    assert sorted(r for r in stored.values() if r is not None) == sorted(ranked)
    assert [d["rank"] for d in record.dropped] == dropped

    page = member_client.get(f"/sessions/{session.id}/context-packs/{body['id']}/")
    rows = [(r["id"], r["rank"]) for r in page.context["rows"]]
    required_rows = len(record.included) - len(ranked)  # the breadcrumbs and both handles
    assert all(rank is None for _, rank in rows[:required_rows])
    assert [rank for _, rank in rows[required_rows:]] == list(
        range(1, len(rows) - required_rows + 1)
    )
    assert b">1</td>" in page.content

    wider = api.post(url, {"budget_tokens": 4000}).json()
    diff = api.get(f"/context-packs/{body['id']}/diff/{wider['id']}").json()
    added = {a["id"]: a for a in diff["added"]}
    for drop in body["dropped"]:
        assert added[drop["id"]]["earlier_drop"]["rank"] == drop["rank"]


def test_it_packs_facts_constraints_first_within_the_budget(api, session, frame, stub_facts):
    stub_facts.append(
        stub_fact(1, "policy.discount", "max 15%", 6, is_constraint=True, source="policy")
    )
    stub_facts.extend(stub_fact(i, f"note.{i}", "n " * 50, 60) for i in range(2, 40))
    body = api.post(
        f"/sessions/{session.id}/context-pack", {"budget_tokens": 800, "query": "discount"}
    ).json()
    assert body["facts"][0]["key"] == "policy.discount"
    assert body["facts"][0]["is_constraint"] is True
    assert body["token_summary"]["breakdown"]["facts"] == sum(f["tokens"] for f in body["facts"])
    assert body["token_summary"]["used"] <= 800
    assert any(d["section"] == "facts" and d["reason"] == "over_budget" for d in body["dropped"])


def test_it_uses_as_many_queries_at_two_data_sizes(api, session, frame, make_handle, stub_facts):
    def assemble_queries():
        with CaptureQueriesContext(connection) as ctx:
            assert (
                api.post(
                    f"/sessions/{session.id}/context-pack", {"budget_tokens": 4000}
                ).status_code
                == 200
            )
        return len(ctx.captured_queries)

    make_handle(frame, tokens=10)
    stub_facts.append(stub_fact(1, "a", "b", 3))
    assemble_queries()  # the first call of a key also stamps its last use
    small = assemble_queries()
    for i in range(200):
        make_handle(frame, f"handle {i}", tokens=30, priority=["high", "medium", "low"][i % 3])
    stub_facts.extend(stub_fact(i, f"k{i}", "v", 5) for i in range(2, 400))
    assert assemble_queries() == small


def test_it_lists_recent_packs_with_what_was_dropped(api, session, frame, make_handle):
    make_handle(frame, "Keep this. " * 100, tokens=400, priority="critical")
    # Too short to show as an excerpt (under twice the least one), too long for the room.
    make_handle(frame, "x " * 240, tokens=120, priority="low")
    api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 500})
    api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 5000})
    response = api.get(f"/sessions/{session.id}/context-packs", {"limit": 5})
    assert response.status_code == 200
    packs = response.json()
    assert [p["budget"] for p in packs] == [5000, 500]
    assert packs[1]["dropped"][0]["reason"] == "over_budget"  # in no form does it fit
    assert packs[1]["dropped"][0]["score"]["priority"] == 0.25
    assert packs[1]["level"] == "none"


def test_it_hides_another_organizations_session(other_api, session, frame):
    assert (
        other_api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 1000}).status_code
        == 404
    )
    assert other_api.get(f"/sessions/{session.id}/context-packs").status_code == 404


def test_it_refuses_a_frame_of_another_session(api, session, make_session, make_frame):
    elsewhere = make_frame(make_session())
    response = api.post(
        f"/sessions/{session.id}/context-pack",
        {"budget_tokens": 1000, "frame_id": str(elsewhere.id)},
    )
    assert response.status_code == 404


def test_it_packs_a_session_without_frames(api, session):
    body = api.post(f"/sessions/{session.id}/context-pack", {"budget_tokens": 500}).json()
    assert body["frame_id"] is None and body["segments"] == [] and body["breadcrumbs"] == []
    assert body["token_summary"]["used"] == body["token_summary"]["breakdown"]["brief_context"]


def test_it_answers_in_the_bytes_its_documented_schema_gives(
    api, session, frame, make_frame, make_handle, stub_facts
):
    """The answer is built without validation: every section of it, filled, is what
    validating it against ContextPackOut and rendering that would send, key order included."""
    child = make_frame(session, parent=frame, goal="Read the contract")
    make_handle(child, "You are careful.", tokens=5, kind="system_prompt", priority="critical")
    make_handle(
        child, "The contract   says 30 days.", tokens=80, summary="30 days.", summary_tokens=3
    )
    make_handle(child, "x " * 400, tokens=400, priority="low")
    make_handle(child, "", tokens=5, state="cold", ref="specs/api.yaml")
    fact_services.working_set_put(session=session, key="plan", value={"next": ["read", "sign"]})
    stub_facts.append(stub_fact(1, "policy.discount", "max 15%", 6, is_constraint=True))
    stub_facts.extend(stub_fact(i, f"note.{i}", "n " * 50, 60) for i in range(2, 40))
    response = api.post(
        f"/sessions/{session.id}/context-pack",
        {"budget_tokens": 900, "query": "contract", "min_compaction": "light"},
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert all(body[section] for section in ("breadcrumbs", "facts", "working_set", "segments"))
    assert body["resources"] and body["dropped"]
    validated = ContextPackOut.model_validate(body).model_dump(mode="json")
    assert json.dumps(validated) == json.dumps(body)
    assert response["Content-Type"] == "application/json; charset=utf-8"


def test_a_stored_pack_lists_what_it_dropped_as_the_assembly_did(api, session, frame, make_handle):
    """Items dropped alike are stored as runs: the pack read back lists every item, in
    the assembly's order, reasons interleaved as they came (cold, offline, excluded)."""
    handles = []
    for i in range(60):
        state = ["cold", "offline", "full", "full"][i % 4]
        handles.append(make_handle(frame, f"doc {i} " * 40, tokens=90, priority="low", state=state))
    excluded = [str(h.id) for h in handles[2::8]]
    created = api.post(
        f"/sessions/{session.id}/context-pack",
        {"budget_tokens": 600, "exclude_handles": excluded},
    ).json()
    reasons = [d["reason"] for d in created["dropped"]]
    assert {"cold", "offline", "excluded", "over_budget"} <= set(reasons)
    assert len(created["dropped"]) >= 60
    listed = api.get(f"/sessions/{session.id}/context-packs").json()
    assert listed[0]["dropped"] == created["dropped"]
    # Kept compressed: a fraction of the answer's bytes for the same items.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT dropped FROM frames_contextpackrecord WHERE id = %s",
            [param(ContextPackRecord, "id", created["id"])],
        )
        (stored,) = cursor.fetchone()
    assert len(bytes(stored)) * 4 < len(orjson.dumps(created["dropped"]))
    assert json_decompressed(stored) == created["dropped"]


def test_a_pack_stored_before_runs_reads_back_as_it_was(api, session, frame):
    items = [
        {"section": "segments", "id": "h1", "reason": "cold", "level": "none", "tokens": 0},
        {"section": "facts", "id": "7", "reason": "over_budget", "level": "none", "tokens": 12},
    ]
    ContextPackRecord.objects.create(
        session=session, frame=frame, budget=1000, used=10, level="none", dropped_stored=items
    )
    unranked = {"rank": None, "score": None, "older_than": None}
    listed = api.get(f"/sessions/{session.id}/context-packs").json()[0]["dropped"]
    assert listed == [{**item, **unranked} for item in items]


def test_a_pack_stored_by_zlib_before_zstd_reads_back_as_it_was(api, session, frame):
    """Records written while the columns were zlib's read back beside the zstd ones."""
    dropped = [
        {
            "section": "segments",
            "id": "h1",
            "reason": "over_budget",
            "level": "none",
            "tokens": 90,
            "rank": 3,
            "score": dict.fromkeys(SCORE_PARTS, 0.25),
            "older_than": None,
        }
    ]
    included = [{"section": "facts", "id": "8", "tokens": 12}]
    record = ContextPackRecord.objects.create(
        session=session, frame=frame, budget=1000, used=12, level="none"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE frames_contextpackrecord SET included = %s, dropped = %s WHERE id = %s",
            [
                zlib.compress(orjson.dumps(included), 1),
                zlib.compress(orjson.dumps(dropped), 1),
                param(ContextPackRecord, "id", record.pk),
            ],
        )
    listed = api.get(f"/sessions/{session.id}/context-packs").json()[0]
    assert listed["dropped"] == dropped
    again = ContextPackRecord.objects.get(pk=record.pk)
    assert again.included == included
    # A record written now is a zstd frame.
    again.save()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT dropped FROM frames_contextpackrecord WHERE id = %s",
            [param(ContextPackRecord, "id", record.pk)],
        )
        (stored,) = cursor.fetchone()
    assert bytes(stored)[:4] == b"\x28\xb5\x2f\xfd"
    assert json_decompressed(stored) == dropped
