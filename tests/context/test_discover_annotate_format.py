"""Seed 003 through the API: discovering a resource cold, leaving notes on handles, and
the pack's format following the session's pressure."""

import pytest

from frames.models import ContextHandle, Event

DOC = " ".join(f"Runbook step {i} says what to check next." for i in range(60))


@pytest.fixture
def session_id(start_session):
    return start_session(context_window_tokens=10_000)["id"]


@pytest.fixture
def frame_id(session_id, push_ok):
    return push_ok(session_id, 100_000)["id"]


def pack(api, session_id, **body):
    response = api.post(f"/sessions/{session_id}/context-pack", {"budget_tokens": 20_000, **body})
    assert response.status_code == 200, response.content
    return response.json()


def usage(api, frame_id, tokens):
    response = api.post(f"/frames/{frame_id}/usage", {"input_tokens": tokens, "output_tokens": 0})
    assert response.status_code == 200, response.content


def test_a_discovered_resource_is_listed_by_name_and_costs_no_window_tokens(
    api, session_id, frame_id
):
    response = api.post(
        f"/frames/{frame_id}/handles",
        {"kind": "document", "ref": "docs/runbook.md", "content": DOC, "state": "cold"},
    )
    assert response.status_code == 201, response.content
    cold = response.json()
    assert cold["state"] == "cold" and cold["estimated_tokens"] > 100
    assert Event.objects.get(type="frame.handle_added").payload["state"] == "cold"

    body = pack(api, session_id)
    assert body["segments"] == []
    assert body["resources"] == [
        {
            "handle_id": cold["id"],
            "name": "docs/runbook.md",
            "tokens": body["resources"][0]["tokens"],
        }
    ]
    assert body["resources"][0]["tokens"] < 10  # the name, not the runbook
    assert body["token_summary"]["breakdown"]["resources"] == body["resources"][0]["tokens"]
    assert "Runbook step" not in str(body)

    # Frame compaction counts it as nothing in the window.
    compacted = api.post(
        f"/frames/{frame_id}/compact", {"target_tokens": 0, "strategy": "priority_based"}
    ).json()
    assert compacted["original_tokens"] == 0

    # Paging it in loads it.
    page = api.post(f"/handles/{cold['id']}/page-in?mode=full").json()
    assert page["content"] == DOC and page["handle"]["state"] == "loaded"
    body = pack(api, session_id)
    assert [s["handle_id"] for s in body["segments"]] == [cold["id"]]
    assert body["resources"] == []


def test_a_new_handle_is_loaded_or_cold_only(api, frame_id):
    for state in ("hot", "indexed", "offline", "nonsense"):
        response = api.post(
            f"/frames/{frame_id}/handles", {"kind": "document", "content": "x", "state": state}
        )
        assert response.status_code == 422, state
    assert not ContextHandle.objects.exists()


def test_notes_are_shown_with_the_handle_and_in_dense_packs(api, session_id, frame_id):
    handle = api.post(f"/frames/{frame_id}/handles", {"kind": "document", "content": DOC}).json()
    response = api.post(f"/handles/{handle['id']}/annotations", {"note": "Step 12 is outdated."})
    assert response.status_code == 201, response.content
    body = response.json()
    assert [n["note"] for n in body["notes"]] == ["Step 12 is outdated."]
    assert body["notes"][0]["actor"]
    event = Event.objects.get(type="handle.annotated")
    assert event.payload["note"] == "Step 12 is outdated."

    # Any later answer about the handle carries its notes.
    attention = api.post(f"/handles/{handle['id']}/attention", {"weight": 2}).json()
    assert [n["note"] for n in attention["notes"]] == ["Step 12 is outdated."]

    # Verbose (low pressure): the content as it is.
    verbose = pack(api, session_id)
    assert verbose["format"] == "verbose"
    assert "[note]" not in verbose["segments"][0]["content"]

    usage(api, frame_id, 6_000)  # 60 % of the window: medium pressure
    dense = pack(api, session_id)
    assert dense["format"] == "dense"
    segment = dense["segments"][0]
    assert segment["content"].endswith("[note] Step 12 is outdated.")
    assert dense["token_summary"]["used"] <= 20_000


@pytest.mark.parametrize("note", ["", "   ", "x" * 2001])
def test_a_bad_note_is_refused_and_changes_nothing(api, frame_id, note):
    handle = api.post(f"/frames/{frame_id}/handles", {"kind": "document", "content": "x"}).json()
    response = api.post(f"/handles/{handle['id']}/annotations", {"note": note})
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"
    response = api.post(f"/handles/{handle['id']}/annotations", {"note": "ok", "pin": True})
    assert response.status_code == 422
    assert not Event.objects.filter(type="handle.annotated").exists()


def test_another_organization_cannot_annotate(api, other_api, frame_id):
    handle = api.post(f"/frames/{frame_id}/handles", {"kind": "document", "content": "x"}).json()
    response = other_api.post(f"/handles/{handle['id']}/annotations", {"note": "mine now"})
    assert response.status_code == 404
    assert not Event.objects.filter(type="handle.annotated").exists()


def test_the_format_follows_pressure_and_tightens_the_pack(api, session_id, frame_id):
    handle = api.post(
        f"/frames/{frame_id}/handles", {"kind": "document", "content": "Spaced    out    text."}
    ).json()
    api.post(
        f"/frames/{frame_id}/handles",
        {"kind": "document", "ref": "notes/ideas.md", "state": "cold"},
    )
    low = pack(api, session_id)
    assert (low["format"], low["token_summary"]["compaction_level"]) == ("verbose", "none")
    assert low["resources"][0]["name"] == "notes/ideas.md"

    usage(api, frame_id, 6_000)
    medium = pack(api, session_id)
    assert (medium["format"], medium["token_summary"]["compaction_level"]) == ("dense", "light")
    assert medium["segments"][0]["content"] == "Spaced out text."

    usage(api, frame_id, 7_500)
    high = pack(api, session_id)
    assert high["format"] == "ultra_dense"
    # Packing starts at moderate, but the one segment is recent and only trimmed.
    assert high["token_summary"]["compaction_level"] == "light"
    assert high["resources"][0]["name"] == "○ notes/ideas.md"
    assert high["segments"][0]["handle_id"] == handle["id"]


def test_the_dashboard_preview_shows_the_format_and_the_cold_resources(
    member_client, make_session, make_frame, make_handle
):
    session = make_session(pressure_level="high")
    frame = make_frame(session)
    make_handle(frame, "Loaded text.", tokens=3)
    make_handle(frame, "", tokens=900, state="cold", ref="specs/api.yaml")
    response = member_client.get(
        f"/sessions/{session.id}/context-preview/", {"budget": 2000}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "badge format-ultra_dense" in html and ">ultra_dense</span>" in html
    assert "Resources (cold, by name)" in html


def test_the_dashboard_shows_notes_under_their_handle(api, member_client, frame_id):
    handle = api.post(f"/frames/{frame_id}/handles", {"kind": "document", "content": "x"}).json()
    api.post(f"/handles/{handle['id']}/annotations", {"note": "Ask Bob before using."})
    api.post(f"/frames/{frame_id}/handles", {"kind": "document", "content": "y"})
    html = member_client.get(f"/frames/{frame_id}/handles/").content.decode()
    assert "Note: Ask Bob before using." in html
    assert html.count("handle-note") == 1
