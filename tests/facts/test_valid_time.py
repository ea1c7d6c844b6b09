"""Valid time through the API: versions that know when they held, reads as of a date,
retroactive corrections, and packs of the facts true then."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from facts.models import Fact
from facts.selectors.lineage import fact_links
from facts.selectors.lookup import fact_current_get
from tests.facts.chains import valid_chain

NOW = datetime(2026, 4, 1, 12, tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@pytest.fixture
def frozen():
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.mark.django_db
def test_a_late_correction_ends_the_old_value_where_it_starts_and_keeps_the_weeks_before(
    api, write, frozen
):
    write(api, key="refund_limit", value="15%", valid_from="2026-02-01T00:00:00Z")
    corrected = write(api, key="refund_limit_v2", value="10%", valid_from="2026-03-01T00:00:00Z")
    assert corrected["outcome"] == "superseded"
    assert corrected["valid_from"] == "2026-03-01T00:00:00Z"
    assert corrected["valid_until"] is None
    assert "held until 2026-03-01" in corrected["notice"]

    old = api.get("/facts/refund_limit").json()
    assert (old["valid_from"], old["valid_until"]) == (
        "2026-02-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
    )
    # The record time stays when it was written: today.
    assert old["timestamp"].startswith("2026-04-01")

    then = api.get("/facts/refund_limit_v2/current", {"at": "2026-02-15T00:00:00Z"})
    assert then.status_code == 200 and then.json()["value"] == "15%"
    after = api.get("/facts/refund_limit/current", {"at": "2026-03-03T00:00:00Z"})
    assert after.json()["value"] == "10%"
    assert api.get("/facts/refund_limit/current").json()["value"] == "10%"
    before = api.get("/facts/refund_limit/current", {"at": "2026-01-15T00:00:00Z"})
    assert before.status_code == 404
    assert "held at 2026-01-15" in before.json()["detail"]


@pytest.mark.django_db
def test_a_version_that_started_before_the_current_one_is_outdated_and_never_read_as_held(
    api, write, frozen
):
    write(api, key="meeting_day", value="Tuesday", valid_from="2026-03-10T00:00:00Z")
    late = write(api, key="meeting_day_v2", value="Monday", valid_from="2026-03-01T00:00:00Z")
    assert late["outcome"] == "outdated"
    assert late["rule"] == "temporal"
    for at in ("2026-03-05T00:00:00Z", "2026-03-20T00:00:00Z"):
        body = api.get("/facts", {"valid_at": at}).json()
        assert "meeting_day_v2" not in [f["key"] for f in body["items"]]
    assert api.get("/facts/meeting_day/current").json()["value"] == "Tuesday"


@pytest.mark.django_db
def test_the_temporal_rule_compares_valid_times_even_against_a_version_without_one(
    api, write, frozen
):
    write(api, key="office", value="Paris")  # holds from its write: 1 April
    earlier = write(api, key="office_v2", value="Lyon", observed_at="2026-03-20T00:00:00Z")
    assert earlier["outcome"] == "outdated"


@pytest.mark.django_db
def test_listing_as_of_a_valid_time_gives_the_versions_that_held_then(api, write, frozen):
    write(api, key="price", value=10, valid_from="2026-01-01T00:00:00Z")
    write(api, key="price_v2", value=12, valid_from="2026-02-01T00:00:00Z")
    write(api, key="price_v3", value=14, valid_from="2026-03-01T00:00:00Z")
    write(api, key="vat", value="20%", valid_from="2026-02-10T00:00:00Z")

    def keys(at):
        body = api.get("/facts", {"valid_at": at}).json()
        return sorted(f["key"] for f in body["items"])

    assert keys("2026-01-15T00:00:00Z") == ["price"]
    assert keys("2026-02-01T00:00:00Z") == ["price_v2"]  # a boundary belongs to the later one
    assert keys("2026-02-20T00:00:00Z") == ["price_v2", "vat"]
    assert keys("2026-03-31T00:00:00Z") == ["price_v3", "vat"]
    assert keys("2025-12-31T00:00:00Z") == []


@pytest.mark.django_db
def test_a_withdrawn_fact_held_until_it_was_withdrawn(api, write, frozen):
    write(api, key="promo", value="spring sale", valid_from="2026-03-01T00:00:00Z")
    frozen.move_to(NOW + timedelta(days=2))
    assert api.post("/facts/promo/invalidate").status_code == 200
    gone = api.get("/facts/promo").json()
    assert gone["valid_until"] == "2026-04-03T12:00:00Z"
    assert api.get("/facts/promo/current", {"at": "2026-03-15T00:00:00Z"}).json()["value"] == (
        "spring sale"
    )
    assert api.get("/facts/promo/current", {"at": "2026-04-04T00:00:00Z"}).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body, field",
    [
        ({"valid_from": "2026-03-01T00:00:00"}, "valid_from"),  # no time zone
        ({"valid_from": "2026-05-01T00:00:00Z"}, "valid_from"),  # in the future
        ({"valid_from": "tuesday"}, "valid_from"),
    ],
)
def test_a_bad_valid_from_is_refused_and_stores_nothing(api, write, frozen, body, field):
    response = api.post("/facts", {"key": "k", "value": 1, "source": "user", **body})
    assert response.status_code == 422
    assert field in response.content.decode()
    assert not Fact.objects.filter(key="k").exists()


@pytest.mark.django_db
def test_an_explicit_supersession_cannot_start_before_the_fact_it_supersedes(api, write, frozen):
    write(api, key="limit", value=5, valid_from="2026-03-01T00:00:00Z")
    response = api.post(
        "/facts",
        {
            "key": "limit_fix",
            "value": 6,
            "source": "user",
            "supersedes": "limit",
            "valid_from": "2026-02-01T00:00:00Z",
        },
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "valid_from"]
    assert api.get("/facts/limit").json()["valid_until"] is None


@pytest.mark.django_db
@pytest.mark.parametrize("query", [{"at": "yesterday"}, {"at": "2026-03-01T00:00:00"}])
def test_a_bad_at_is_a_422(api, write, query):
    write(api, key="x", value=1)
    assert api.get("/facts/x/current", query).status_code == 422
    assert api.get("/facts", {"valid_at": query["at"]}).status_code == 422


@pytest.mark.django_db
def test_a_1000_version_chain_reads_as_of_a_date_in_three_queries(
    api, django_assert_max_num_queries
):
    valid_chain(api.organization, "rate", 1000, datetime(2020, 1, 1, tzinfo=UTC))
    at = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=437, hours=5)
    with django_assert_max_num_queries(3):
        fact = fact_current_get(organization=api.organization, key="rate_v3", at=at)
        links = fact_links(fact)
    assert fact.value == 437
    assert (links["supersedes"], links["superseded_by"]) == ("rate_v436", "rate_v438")
    assert api.get("/facts/rate_v1/current", {"at": _iso(at)}).json()["key"] == "rate_v437"


@pytest.mark.django_db
def test_a_pack_as_of_a_valid_time_holds_the_facts_true_then(api, write, make_session, frozen):
    write(api, key="refund_limit", value="15% of the order", valid_from="2026-02-01T00:00:00Z")
    write(api, key="refund_limit_v2", value="10% of the order", valid_from="2026-03-01T00:00:00Z")
    session = make_session(api)

    def pack(**extra):
        response = api.post(
            f"/sessions/{session.pk}/context-pack",
            {"budget_tokens": 4000, "query": "refund limit", **extra},
        )
        assert response.status_code == 200, response.content
        return response.content.decode()

    then = pack(valid_at="2026-02-15T00:00:00Z")
    assert "15% of the order" in then and "10% of the order" not in then
    now = pack()
    assert "10% of the order" in now and "15% of the order" not in now
    bad = api.post(
        f"/sessions/{session.pk}/context-pack",
        {"budget_tokens": 4000, "valid_at": "2026-02-15"},
    )
    assert bad.status_code == 422


@pytest.mark.django_db
def test_verify_checks_the_valid_times_of_every_chain(api, write, frozen):
    from io import StringIO

    from django.core.management import CommandError, call_command

    write(api, key="rate", value=1, valid_from="2026-01-01T00:00:00Z")
    write(api, key="rate_v2", value=2, valid_from="2026-02-01T00:00:00Z")
    write(api, key="rate_v3", value=3)
    call_command("rebuild_projections", "--verify", stdout=StringIO())

    # A gap a bad edit left: the first version ends before the second starts.
    Fact.objects.filter(key="rate").update(valid_until=datetime(2026, 1, 20, tzinfo=UTC))
    out = StringIO()
    with pytest.raises(CommandError, match="valid times of facts"):
        call_command("rebuild_projections", "--verify", stdout=out)
    assert "fact chain of rate: valid time: gap between versions 1 and 2" in out.getvalue()


@pytest.mark.django_db
def test_a_session_export_carries_both_times_of_its_facts(api, write, make_session, frozen):
    session = make_session(api)
    write(
        api,
        key="order_7_state",
        value="shipped",
        scope="session",
        scope_id=str(session.pk),
        valid_from="2026-03-30T08:00:00Z",
    )
    doc = api.get(f"/sessions/{session.pk}/export").json()
    (fact,) = doc["facts"]
    assert fact["valid_from"].startswith("2026-03-30T08:00:00")
    assert fact["valid_until"] is None
    assert fact["created_at"].startswith("2026-04-01T12:00:00")


@pytest.mark.django_db
def test_a_write_without_a_time_after_an_observation_slightly_ahead_still_supersedes(
    api, write, frozen
):
    ahead = NOW + timedelta(minutes=3)  # another host's clock, within the allowed skew
    write(api, key="queue_depth", value=12, observed_at=_iso(ahead))
    later = write(api, key="queue_depth_v2", value=15)
    assert later["outcome"] == "superseded"
    assert later["valid_from"] == _iso(ahead)
