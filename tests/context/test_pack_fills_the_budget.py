"""A pack fills its budget with what the question needs, through the API as an agent asks.

The handles are written through ``POST /frames/{id}/handles``: the server counts their
tokens (and computes what ranking needs) as it would for any agent.
"""

import random
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from frames.models import Frame, Session
from tests.conftest import ApiClient, api_client_create, built_once
from tests.context.conftest import frame_make, session_make

WORDS = (
    "invoice shipment ledger quarter vendor region forecast payroll audit margin "
    "customer renewal pipeline backlog roadmap staffing contract warehouse freight "
    "pricing discount churn onboarding support escalation incident release sprint"
).split()


def _chatter(rng: random.Random, words: int = 28) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _conversation(api, frame) -> list[str]:
    """300 message handles of about 40 tokens each (12,000 tokens in all)."""
    rng = random.Random(7)
    ids = []
    for index in range(300):
        response = api.post(
            f"/frames/{frame.id}/handles",
            {"kind": "message", "content": f"Turn {index}: {_chatter(rng)}"},
        )
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    return ids


@dataclass
class World:
    api: ApiClient
    session: Session
    frame: Frame
    conversation: list[str]


def _world_build() -> World:
    api = api_client_create()
    session = session_make(api.organization)
    frame = frame_make(session)
    return World(api, session, frame, _conversation(api, frame))


@pytest.fixture(scope="module")
def world_once(django_db_setup, django_db_blocker) -> Iterator[World]:
    """The agent, its session and frame and the frame's 300 handles, written once for the
    module (``built_once``: each test's writes, a planted handle or an edited one, are
    rolled back before the next test)."""
    yield from built_once(django_db_blocker, _world_build)


@pytest.fixture
def api(world_once, db) -> ApiClient:
    """The agent that wrote the conversation, with a client of the test's own."""
    once = world_once.api
    return ApiClient(key=once.key, organization=once.organization, agent=once.agent)


@pytest.fixture
def session(world_once, db) -> Session:
    return Session.objects.get(pk=world_once.session.pk)


@pytest.fixture
def frame(world_once, db) -> Frame:
    return Frame.objects.get(pk=world_once.frame.pk)


@pytest.fixture
def conversation(world_once) -> list[str]:
    return list(world_once.conversation)


def _pack(api, session, frame, budget, query=None):
    body = {"budget_tokens": budget}
    if frame is not None:
        body["frame_id"] = str(frame.id)
    if query is not None:
        body["query"] = query
    response = api.post(f"/sessions/{session.id}/context-pack", body)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("query", [None, "freight pricing for the warehouse"])
def test_a_frame_larger_than_the_budget_fills_it_instead_of_falling_to_the_brief(
    api, session, frame, conversation, query
):
    body = _pack(api, session, frame, 4000, query)
    summary = body["token_summary"]
    assert summary["used"] <= 4000
    assert summary["used"] >= 0.9 * 4000, summary
    assert len(body["segments"]) >= 80
    assert summary["compaction_level"] != "critical"
    # Every handle left out says so, with its rank and score: none vanishes unexplained.
    shown = {s["handle_id"] for s in body["segments"]}
    dropped = {d["id"]: d for d in body["dropped"] if d["section"] == "segments"}
    assert shown | set(dropped) == set(conversation)
    assert all(d["reason"] == "over_budget" and d["rank"] for d in dropped.values())


def test_without_a_query_the_newest_handles_come_first(api, session, frame, conversation):
    body = _pack(api, session, frame, 1000)
    shown = [s["handle_id"] for s in body["segments"]]
    assert shown == conversation[::-1][: len(shown)]
    ranks = [s["rank"] for s in body["segments"]]
    assert ranks == sorted(ranks)
    assert all(s["score"]["lexical"] == 0 for s in body["segments"])


def test_a_handle_only_the_query_names_enters_a_small_pack_when_asked_about(
    api, session, frame, conversation
):
    rng = random.Random(11)
    planted = api.post(
        f"/frames/{frame.id}/handles",
        {
            "kind": "message",
            "content": "The Zanzibar office renews its lease with Okonkwo Properties in March.",
        },
    ).json()["id"]
    # Newer chatter buries it: by recency alone it is far outside 1,000 tokens.
    for index in range(60):
        api.post(
            f"/frames/{frame.id}/handles",
            {"kind": "message", "content": f"Later {index}: {_chatter(rng)}"},
        )
    asked = _pack(api, session, frame, 1000, "When does the Zanzibar lease renew?")
    not_asked = _pack(api, session, frame, 1000)
    other_question = _pack(api, session, frame, 1000, "What is the freight backlog?")
    asked_ids = [s["handle_id"] for s in asked["segments"]]
    assert planted in asked_ids
    assert planted not in [s["handle_id"] for s in not_asked["segments"]]
    assert planted not in [s["handle_id"] for s in other_question["segments"]]
    found = next(s for s in asked["segments"] if s["handle_id"] == planted)
    assert found["score"]["lexical"] == 1.0  # the best lexical match of the frame
    assert found["rank"] == min(s["rank"] for s in asked["segments"])
    assert asked["token_summary"]["used"] >= 0.9 * 1000


def test_the_score_parts_add_up_to_the_total(api, session, frame, conversation):
    body = _pack(api, session, frame, 2000, "renewal contract audit")
    for item in body["segments"] + [d for d in body["dropped"] if d["score"]]:
        score = item["score"]
        parts = sum(v for k, v in score.items() if k != "total")
        assert score["total"] == pytest.approx(parts, abs=1e-3)


def test_of_two_current_facts_saying_nearly_the_same_the_newer_ranks_first(api, session):
    def fact(**body):
        response = api.post("/facts", {"source": "user", "subject": "refund limit", **body})
        assert response.status_code == 201, response.content
        return response.json()["id"]

    older = fact(key="refund_limit", value="Refunds are capped at 15% of the order")
    newer = fact(
        key="refund_limit_here",
        value="Refunds are capped at 10% of the order",
        scope="session",
        scope_id=str(session.id),
    )
    body = _pack(api, session, None, 2000, "What is the refund cap?")
    ranked = {f["id"]: f for f in body["facts"]}
    assert ranked[str(newer)]["rank"] < ranked[str(older)]["rank"]
    assert ranked[str(older)]["older_than"] == str(newer)
    assert ranked[str(older)]["score"]["older"] <= 0 and ranked[str(newer)]["older_than"] is None


def test_a_pack_after_any_change_to_the_frames_handles_shows_the_change(
    api, session, frame, conversation
):
    """Packs of an unchanged frame start from what the last one prepared; any change to a
    handle, even one written behind every service's back, is seen by the next pack."""
    from frames.models import ContextHandle

    first = _pack(api, session, frame, 1000)
    assert _pack(api, session, frame, 1000)["segments"] == first["segments"]
    newest = first["segments"][0]["handle_id"]
    ContextHandle.objects.filter(pk=newest).update(content="Turn renamed: the freight audit.")
    changed = _pack(api, session, frame, 1000)
    assert changed["segments"][0]["content"] == "Turn renamed: the freight audit."
    ContextHandle.objects.filter(pk=newest).update(priority="critical")
    assert _pack(api, session, frame, 1000)["segments"][0]["reason"] == "critical"
    ContextHandle.objects.filter(pk=newest).delete()
    after = _pack(api, session, frame, 1000)
    assert newest not in {s["handle_id"] for s in after["segments"]}
    assert newest not in {d["id"] for d in after["dropped"]}
