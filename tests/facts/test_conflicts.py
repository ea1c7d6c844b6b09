"""Proposed supersessions: detected on a write, never applied by themselves, settled by a
decision (accept, reject, not the same thing) that is remembered."""

import pytest

from contextops.models import AuditEntry
from facts.models import Fact, FactConflict


def _meeting(api, write):
    write(api, key="meeting_day", value="Tuesday 2pm")
    return write(api, key="sync_meeting", value="Thursday 3pm")


@pytest.mark.django_db
def test_a_write_about_the_same_entity_under_another_subject_is_proposed_and_nothing_changes(
    api, write
):
    body = _meeting(api, write)
    assert body["outcome"] == "created"
    (proposal,) = body["proposed_conflicts"]
    assert proposal["status"] == "proposed"
    assert (proposal["fact"], proposal["other"]) == ("sync_meeting", "meeting_day")
    assert (proposal["fact_value"], proposal["other_value"]) == ("Thursday 3pm", "Tuesday 2pm")
    assert proposal["matched_words"] == ["meeting"]
    assert 0.25 <= proposal["similarity"] <= 1
    # Both stay current: a proposal is never applied by itself.
    assert api.get("/facts/meeting_day/current").json()["key"] == "meeting_day"
    assert api.get("/facts/sync_meeting/current").json()["key"] == "sync_meeting"
    listed = api.get("/fact-conflicts").json()
    assert [c["id"] for c in listed["items"]] == [proposal["id"]]


@pytest.mark.django_db
def test_facts_that_only_look_alike_are_never_proposed(api, write):
    write(api, key="shipping_cost_eu", value="4.90 EUR")
    assert write(api, key="shipping_cost_us", value="9.90 USD")["proposed_conflicts"] == []
    write(api, key="refund_limit", value="15%")
    assert write(api, key="travel_limit", value="500 EUR")["proposed_conflicts"] == []
    write(api, key="dog_name", value="Rex")
    assert write(api, key="dog_owner", value="Rex")["proposed_conflicts"] == []  # same value
    assert FactConflict.objects.count() == 0


@pytest.mark.django_db
def test_accepting_applies_rule_2_and_records_who_decided(api, write):
    proposal = _meeting(api, write)["proposed_conflicts"][0]
    response = api.post(f"/fact-conflicts/{proposal['id']}/accept")
    assert response.status_code == 200, response.content
    decided = response.json()
    assert decided["status"] == "accepted"
    assert decided["decided_by"] == "agent:researcher"
    assert decided["decided_at"] is not None
    old = api.get("/facts/meeting_day").json()
    assert old["status"] == "superseded" and old["superseded_by"] == "sync_meeting"
    new = api.get("/facts/sync_meeting").json()
    assert (new["supersedes"], new["supersession_rule"], new["version"]) == (
        "meeting_day",
        "implicit",
        2,
    )
    assert old["valid_until"] == new["valid_from"]
    assert api.get("/facts/meeting_day/current").json()["value"] == "Thursday 3pm"
    again = api.post(f"/fact-conflicts/{proposal['id']}/reject")
    assert again.status_code == 409 and again.json()["error"] == "already_decided"


@pytest.mark.django_db
@pytest.mark.parametrize("decision, status", [("reject", "rejected"), ("distinct", "distinct")])
def test_a_refused_pair_is_remembered_and_never_proposed_again(api, write, decision, status):
    proposal = _meeting(api, write)["proposed_conflicts"][0]
    assert api.post(f"/fact-conflicts/{proposal['id']}/{decision}").json()["status"] == status
    assert api.get("/facts/meeting_day").json()["is_valid"] is True
    # A new version of either chain says something else again: the pair stays settled.
    again = write(api, key="sync_meeting_v2", value="Friday 4pm", supersedes="sync_meeting")
    assert again["proposed_conflicts"] == []
    assert FactConflict.objects.count() == 1
    assert api.get("/fact-conflicts").json()["count"] == 0
    assert api.get("/fact-conflicts", {"status": "any"}).json()["count"] == 1


@pytest.mark.django_db
def test_a_lower_authority_cannot_accept_against_a_higher_fact(api, make_api, write):
    boss = make_api(agent="boss", authority="admin")
    write(boss, key="meeting_day", value="Tuesday 2pm")
    proposal = write(api, key="sync_meeting", value="Thursday 3pm")["proposed_conflicts"][0]
    refused = api.post(f"/fact-conflicts/{proposal['id']}/accept")
    assert refused.status_code == 403 and refused.json()["error"] == "authority_too_low"
    # Even the higher authority cannot let the lower writer's fact supersede its own.
    still = boss.post(f"/fact-conflicts/{proposal['id']}/accept")
    assert still.status_code == 403
    assert Fact.objects.get(key="meeting_day").is_valid
    assert FactConflict.objects.get().status == "proposed"


@pytest.mark.django_db
def test_proposals_filter_by_subject_source_and_age_and_stay_in_their_organization(
    api, other_api, write
):
    import time_machine

    with time_machine.travel("2026-03-01T10:00:00Z", tick=False) as clock:
        _meeting(api, write)
        clock.move_to("2026-03-03T10:00:00Z")
        write(api, key="wifi_password", value="sunflower42", source="it_desk")
        write(api, key="office_wifi_password", value="bluebird77")

        def ids(**query):
            return [c["fact"] for c in api.get("/fact-conflicts", query).json()["items"]]

        assert ids() == ["office_wifi_password", "sync_meeting"]
        assert ids(subject="meeting_day") == ["sync_meeting"]
        assert ids(source="it_desk") == ["office_wifi_password"]
        assert ids(min_age_hours=24) == ["sync_meeting"]
        assert ids(max_age_hours=24) == ["office_wifi_password"]
        assert api.get("/fact-conflicts", {"status": "nope"}).status_code == 422
    first = FactConflict.objects.order_by("id").first()
    assert other_api.get("/fact-conflicts").json()["count"] == 0
    assert other_api.post(f"/fact-conflicts/{first.pk}/accept").status_code == 404
    assert api.post(f"/fact-conflicts/{first.pk}/maybe").status_code == 404
    assert api.post("/fact-conflicts/999999/accept").status_code == 404


@pytest.mark.django_db
def test_no_proposal_is_ever_applied_without_a_decision(api, write):
    """Every write of the labelled set's pairs: the facts stay as the supersession rules
    left them (all current), whatever was proposed, until someone decides."""
    import json
    from pathlib import Path

    doc = json.loads((Path(__file__).parents[1] / "fixtures" / "conflict_pairs.json").read_text())
    for i, pair in enumerate(doc["pairs"][:60]):
        scope = {"scope": "task", "scope_id": f"t{i}"}
        write(
            api,
            key=f"{pair['a']['key']}__{i}",
            value=pair["a"]["value"],
            subject=pair["a"]["key"],
            **scope,
        )
        write(
            api,
            key=f"{pair['b']['key']}__{i}",
            value=pair["b"]["value"],
            subject=pair["b"]["key"],
            **scope,
        )
    assert FactConflict.objects.count() > 10
    assert FactConflict.objects.exclude(status="proposed").count() == 0
    assert Fact.objects.filter(is_valid=False).count() == 0
    assert not AuditEntry.objects.filter(target__startswith="fact conflict").exists()


@pytest.mark.django_db
def test_the_labelled_pairs_meet_the_precision_and_recall_targets(api):
    """The same measure `make bench-conflicts` reports, through the real write path."""
    from tests.bench.conflict_pairs import measure

    figures = measure(api.organization, api.agent.authority)
    assert figures["pairs"] >= 200
    assert figures["precision"] >= 0.9, figures["misses"]
    assert figures["recall"] >= 0.7, figures["misses"]
