"""The facts API: reads, lineage, dependencies, scopes, errors, other organizations."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from facts.models import Fact


def test_it_reads_one_version_and_the_current_head(api, write):
    write(api, key="plan_v1", value={"steps": 3})
    write(api, key="plan_v2", value={"steps": 4}, supersedes="plan_v1")
    write(api, key="plan_v3", value={"steps": 5}, supersedes="plan_v2")
    assert api.get("/facts/plan_v1").json()["value"] == {"steps": 3}
    head = api.get("/facts/plan_v1/current").json()
    assert head["key"] == "plan_v3" and head["version"] == 3 and head["is_valid"] is True
    assert head["tokens"] > 0 and head["timestamp"]


def test_it_reads_the_current_head_in_one_query(api):
    from facts.selectors.lookup import fact_current_get
    from facts.services import fact_write

    org = api.organization
    fact_write(organization=org, key="k_v1", value=1, authority="employee")
    for i in range(2, 40):
        fact_write(
            organization=org, key=f"k_v{i}", value=i, supersedes=f"k_v{i - 1}", authority="employee"
        )
    with CaptureQueriesContext(connection) as ctx:
        head = fact_current_get(organization=org, key="k_v1")
    assert head.key == "k_v39" and len(ctx.captured_queries) == 1


def test_it_returns_the_lineage_oldest_first_with_rules(api, make_api, write):
    boss = make_api(agent="boss", authority="manager")
    write(api, key="price_v1", subject="price", value="10")
    write(api, key="price_v2", value="11", supersedes="price_v1")
    write(boss, key="price_v3", subject="price", value="12")
    write(api, key="margin", value="2", depends_on=["price_v3"])
    lineage = api.get("/facts/price_v2/lineage").json()
    assert [v["key"] for v in lineage["chain"]] == ["price_v1", "price_v2", "price_v3"]
    assert [v["superseded_by_rule"] for v in lineage["chain"]] == ["explicit", "authority", ""]
    assert lineage["dependents"] == [
        {
            "key": "margin",
            "subject": "margin",
            "value": "2",
            "is_valid": True,
            "status": "active",
            "needs_review": False,
            "depends_on": ["price_v3"],
        }
    ]


def test_it_reads_lineage_with_a_constant_number_of_queries(api):
    from facts.selectors.lineage import fact_lineage
    from facts.services import fact_write

    org = api.organization
    fact_write(organization=org, key="c_v1", value=1, authority="employee")

    def count():
        with CaptureQueriesContext(connection) as ctx:
            fact_lineage(organization=org, key="c_v1")
        return len(ctx.captured_queries)

    short = count()
    for i in range(2, 30):
        fact_write(
            organization=org, key=f"c_v{i}", value=i, supersedes=f"c_v{i - 1}", authority="employee"
        )
    assert count() == short


def test_it_flags_dependents_transitively_when_a_fact_is_superseded(api, write):
    write(api, key="rate_v1", value="3%")
    write(api, key="forecast", value="up", depends_on=["rate_v1"])
    write(api, key="budget_plan", value="hire", depends_on=["forecast"])
    write(api, key="unrelated", value="x")
    result = write(api, key="rate_v2", value="5%", supersedes="rate_v1")
    assert result["flagged_for_review"] == 2
    flagged = api.get("/facts", {"needs_review": "true"}).json()
    assert sorted(f["key"] for f in flagged["items"]) == ["budget_plan", "forecast"]
    clear = api.get("/facts", {"needs_review": "false"}).json()
    assert sorted(f["key"] for f in clear["items"]) == ["rate_v2", "unrelated"]
    lineage = api.get("/facts/rate_v1/lineage").json()
    assert {d["key"]: d["needs_review"] for d in lineage["dependents"]} == {
        "forecast": True,
        "budget_plan": True,
    }

    cleared = api.post("/facts/forecast/review").json()
    assert cleared["needs_review"] is False
    assert [f["key"] for f in api.get("/facts", {"needs_review": "true"}).json()["items"]] == [
        "budget_plan"
    ]


def test_it_refuses_a_cycle_in_depends_on(api, write):
    write(api, key="a_v1", subject="a", value="1")
    write(api, key="b", value="2", depends_on=["a_v1"])
    response = api.post(
        "/facts",
        {"key": "a_v2", "value": "3", "source": "user", "supersedes": "a_v1", "depends_on": ["b"]},
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "depends_on"]
    assert "cycle" in response.json()["detail"]
    self_loop = api.post(
        "/facts", {"key": "c", "value": "3", "source": "user", "depends_on": ["c"]}
    )
    assert self_loop.status_code == 422


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": "galaxy"}, "scope"),
        ({"memory_type": "episodic"}, "memory_type"),
        ({"scope": "task"}, "scope_id"),
        ({"scope_id": "t1"}, "scope_id"),
        ({"depends_on": ["nope"]}, "depends_on"),
        ({"constraint": {"max": "fifteen"}}, "constraint"),
        ({"value": None}, "value"),
        ({"key": "a/b"}, "key"),
        ({"read_authority": "emperor"}, "read_authority"),
        ({"observed_at": "2026-01-01T00:00:00"}, "observed_at"),
        ({"scope": "hypothetical", "scope_id": "t1", "supersedes": "x"}, "supersedes"),
    ],
)
def test_it_answers_422_for_a_malformed_fact(api, body, field):
    response = api.post("/facts", {"key": "k", "value": "v", "source": "user", **body})
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "validation_error"
    assert response.json()["errors"][0]["loc"][-1] == field


def test_it_answers_422_for_missing_fields_and_bad_types(api):
    assert api.post("/facts", {"key": "k", "source": "user"}).status_code == 422
    assert api.post("/facts", {"key": "k", "value": "v"}).status_code == 422
    assert (
        api.post("/facts", {"key": "k", "value": "v", "source": "u", "depends_on": "x"}).status_code
        == 422
    )
    assert api.post("/facts", {"key": "k\x00", "value": "v", "source": "u"}).status_code == 422
    assert api.get("/facts", {"valid": "maybe"}).status_code == 422
    for name in ("scope", "memory_type", "status"):
        response = api.get("/facts", {name: "bogus"})
        assert response.status_code == 422 and response.json()["errors"][0]["loc"] == [
            "query",
            name,
        ]


def test_it_answers_404_for_superseding_a_missing_key(api):
    response = api.post(
        "/facts", {"key": "x_v2", "value": "v", "source": "user", "supersedes": "x_v1"}
    )
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert not Fact.objects.filter(key="x_v2").exists()


def test_it_answers_404_for_another_organizations_facts(api, other_api, write):
    write(api, key="secret_v1", value="acme only")
    assert other_api.get("/facts/secret_v1").status_code == 404
    assert other_api.get("/facts/secret_v1/current").status_code == 404
    assert other_api.get("/facts/secret_v1/lineage").status_code == 404
    assert other_api.post("/facts/secret_v1/review").status_code == 404
    assert other_api.post("/facts/secret_v1/invalidate").status_code == 404
    superseding = other_api.post(
        "/facts", {"key": "s2", "value": "v", "source": "user", "supersedes": "secret_v1"}
    )
    assert superseding.status_code == 404
    assert other_api.get("/facts").json()["count"] == 0
    check = other_api.post("/constraints/check", {"subject": "secret", "value": 1}).json()
    assert check["checked"] == []
    # Globex may use the same key for its own fact.
    assert (
        other_api.post(
            "/facts", {"key": "secret_v1", "value": "globex", "source": "user"}
        ).status_code
        == 201
    )
    assert api.get("/facts/secret_v1").json()["value"] == "acme only"


def test_it_refuses_the_same_key_with_another_value(api, write):
    write(api, key="k", value="one")
    response = api.post("/facts", {"key": "k", "value": "two", "source": "user"})
    assert response.status_code == 409 and response.json()["error"] == "key_exists"


def test_it_answers_409_when_the_fact_was_already_superseded(api, write):
    write(api, key="x_v1", value="1")
    write(api, key="x_v2", value="2", supersedes="x_v1")
    response = api.post(
        "/facts", {"key": "x_v3", "value": "3", "source": "user", "supersedes": "x_v1"}
    )
    assert response.status_code == 409
    assert response.json() | {"detail": ""} == {
        "error": "already_superseded",
        "detail": "",
        "superseded_by": "x_v2",
    }


def test_it_keeps_hypothetical_and_draft_facts_out_of_global_decisions(api, write):
    write(api, key="launch_v1", subject="launch", value="March")
    hypo = write(
        api,
        key="launch_what_if",
        subject="launch",
        value="May",
        scope="hypothetical",
        scope_id="t1",
    )
    draft = write(
        api, key="launch_draft", subject="launch", value="June", scope="draft", scope_id="t1"
    )
    assert hypo["outcome"] == "created" and draft["outcome"] == "created"
    assert api.get("/facts/launch_v1/current").json()["value"] == "March"
    global_facts = api.get("/facts", {"scope": "global", "subject": "launch"}).json()
    assert [f["key"] for f in global_facts["items"]] == ["launch_v1"]
    assert api.get("/facts", {"scope": "hypothetical", "scope_id": "t1"}).json()["count"] == 1


def test_unscoped_fact_lists_leave_hypothetical_and_draft_facts_out(api, write, member_client):
    """A what-if or a draft is not one of the organization's facts: GET /facts (also with
    ?subject= and ?valid=true) and the dashboard's list show it only under its scope."""
    _launch_what_if(api, write)
    write(api, key="launch_draft", subject="launch", value="June", scope="draft", scope_id="t2")
    for params in ({}, {"subject": "launch"}, {"valid": "true"}, {"valid": "any"}):
        listed = api.get("/facts", params).json()
        assert [f["key"] for f in listed["items"]] == ["launch_v1"], params
        assert listed["count"] == 1
    assert [f["key"] for f in api.get("/facts", {"scope": "draft"}).json()["items"]] == [
        "launch_draft"
    ]
    assert [f["key"] for f in api.get("/facts", {"scope_id": "t1"}).json()["items"]] == [
        "launch_what_if"
    ]
    page = member_client.get("/facts/").content.decode()
    assert "launch_v1" in page and "launch_what_if" not in page and "launch_draft" not in page
    page = member_client.get("/facts/?scope=hypothetical").content.decode()
    assert "launch_what_if" in page and "launch_v1" not in page


def _launch_what_if(api, write) -> None:
    """A global launch date and a hypothetical one in task t1."""
    write(api, key="launch_v1", subject="launch", value="March")
    write(
        api,
        key="launch_what_if",
        subject="launch",
        value="May",
        scope="hypothetical",
        scope_id="t1",
    )


def test_it_promotes_a_hypothetical_fact_as_a_supersession(api, write):
    _launch_what_if(api, write)
    promoted = api.post("/facts/launch_what_if/promote")
    assert promoted.status_code == 200, promoted.content
    body = promoted.json()
    assert (
        body["scope"] == "global"
        and body["supersedes"] == "launch_v1"
        and body["rule"] == "promotion"
    )
    assert api.get("/facts/launch_v1/current").json()["value"] == "May"
    assert api.post("/facts/launch_what_if/promote").status_code == 422  # already global


def test_it_refuses_a_promotion_over_a_higher_authority(make_api, write):
    manager = make_api(agent="m", authority="manager")
    intern = make_api(agent="i", authority="intern")
    write(manager, key="launch_v1", subject="launch", value="March")
    write(intern, key="launch_idea", subject="launch", value="May", scope="draft", scope_id="t9")
    response = intern.post("/facts/launch_idea/promote")
    assert response.status_code == 403 and response.json()["error"] == "authority_too_low"


def test_it_discards_a_draft(api, write):
    write(api, key="draft_note", value="maybe", scope="draft", scope_id="t1")
    discarded = api.post("/facts/draft_note/discard").json()
    assert discarded["status"] == "discarded" and discarded["is_valid"] is False
    assert api.post("/facts/draft_note/discard").status_code == 409
    write(api, key="global_note", value="sure")
    assert api.post("/facts/global_note/discard").status_code == 422


def test_it_invalidates_a_fact_and_flags_its_dependents(api, write):
    write(api, key="base", value="1")
    write(api, key="derived", value="2", depends_on=["base"])
    assert api.post("/facts/base/invalidate").json()["status"] == "invalidated"
    assert api.get("/facts/base/current").status_code == 404
    assert api.get("/facts/derived").json()["needs_review"] is True


def test_it_lists_facts_with_filters_and_pages(api, write):
    for i in range(5):
        write(api, key=f"item{i}", value=i, source="observation" if i % 2 else "user")
    page = api.get("/facts", {"memory_type": "capability", "limit": 1}).json()
    assert page["count"] == 2 and page["next_offset"] == 1 and len(page["items"]) == 1
    assert api.get("/facts", {"subject": "item3"}).json()["items"][0]["value"] == 3
    assert api.get("/facts", {"valid": "false"}).json()["count"] == 0
    write(api, key="item0_v2", subject="item0", value="changed")
    assert api.get("/facts", {"valid": "false"}).json()["count"] == 1
    assert api.get("/facts", {"valid": "any"}).json()["count"] == 6


def test_it_documents_every_path_in_the_openapi_schema(api):
    paths = api.client.get("/api/v1/openapi.json").json()["paths"]
    for path in (
        "/api/v1/facts",
        "/api/v1/facts/{key}",
        "/api/v1/facts/{key}/current",
        "/api/v1/facts/{key}/lineage",
        "/api/v1/facts/{key}/promote",
        "/api/v1/facts/{key}/discard",
        "/api/v1/facts/{key}/review",
        "/api/v1/constraints/check",
        "/api/v1/sessions/{session_id}/working-set/{key}",
        "/api/v1/sessions/{session_id}/environment",
    ):
        assert path in paths, path


def test_it_keeps_a_refused_explicit_supersession_as_the_writers_proposal(make_api, write):
    manager = make_api(agent="m", authority="manager")
    intern = make_api(agent="i", authority="intern")
    write(manager, key="discount_policy", value="max 15%")
    write(manager, key="quote", value="12% for Initech", depends_on=["discount_policy"])
    body = {"key": "discount_v2", "value": "25%", "source": "user", "supersedes": "discount_policy"}

    denied = intern.post("/facts", body)
    assert denied.status_code == 403, denied.content
    error = denied.json()
    assert error["error"] == "authority_too_low" and error["proposal"] == "discount_v2"
    assert error["fact_key"] == "discount_policy" and error["fact_authority"] == "manager"
    assert "kept as the proposal discount_v2" in error["detail"]

    proposal = intern.get("/facts/discount_v2").json()
    assert proposal["status"] == "proposal" and proposal["is_valid"] is False
    assert proposal["contested"] == "discount_policy" and proposal["authority"] == "intern"
    assert proposal["value"] == "25%" and proposal["supersedes"] is None
    assert intern.get("/facts/discount_v2/current").status_code == 404  # never current

    current = manager.get("/facts/discount_policy/current").json()
    assert current["key"] == "discount_policy" and current["value"] == "max 15%"
    assert current["superseded_by"] is None
    lineage = manager.get("/facts/discount_policy/lineage").json()
    assert [v["key"] for v in lineage["chain"]] == ["discount_policy"]
    assert [(c["key"], c["status"]) for c in lineage["contested"]] == [("discount_v2", "proposal")]
    assert lineage["dependents"][0]["needs_review"] is False
    listed = manager.get("/facts", {"status": "proposal", "valid": "false"}).json()
    assert [f["key"] for f in listed["items"]] == ["discount_v2"]
    assert "discount_v2" not in [f["key"] for f in manager.get("/facts").json()["items"]]

    # The same request again gets the same answer, and stores nothing more.
    again = intern.post("/facts", body)
    assert again.status_code == 403 and again.json()["proposal"] == "discount_v2"
    assert Fact.objects.filter(organization=intern.organization).count() == 3


def test_it_treats_a_restatement_under_a_new_key_as_unchanged(api, write):
    write(api, key="meeting_tuesday", subject="meeting", value="Tuesday at 2pm")
    write(api, key="agenda", value="budget first", depends_on=["meeting_tuesday"])
    for key in ("meeting_again", "meeting_once_more", "meeting_v3"):
        same = write(api, status=200, key=key, subject="meeting", value="Tuesday at 2pm")
        assert same["outcome"] == "unchanged" and same["flagged_for_review"] == 0
        assert same["key"] == "meeting_tuesday" and same["is_valid"] is True
        assert "meeting_tuesday already states this" in same["notice"]
        assert api.get(f"/facts/{key}").status_code == 404  # nothing stored
    lineage = api.get("/facts/meeting_tuesday/lineage").json()
    assert [v["key"] for v in lineage["chain"]] == ["meeting_tuesday"]
    assert api.get("/facts/agenda").json()["needs_review"] is False
    assert api.get("/facts", {"subject": "meeting", "valid": "any"}).json()["count"] == 1

    # Another scope is another subject; another value is a change.
    write(
        api,
        key="meeting_task",
        subject="meeting",
        value="Tuesday at 2pm",
        scope="task",
        scope_id="t1",
    )
    moved = write(api, key="meeting_thursday", subject="meeting", value="Thursday at 3pm")
    assert moved["outcome"] == "superseded" and moved["flagged_for_review"] == 1
    assert api.get("/facts/agenda").json()["needs_review"] is True


def test_it_supersedes_a_restatement_with_more_weight_without_flagging(make_api, write):
    employee = make_api(agent="e", authority="employee")
    manager = make_api(agent="m", authority="manager")
    write(employee, key="office_hours", value="9 to 5")
    write(employee, key="rota", value="two shifts", depends_on=["office_hours"])
    backed = write(manager, key="office_hours_v2", subject="office_hours", value="9 to 5")
    assert (backed["outcome"], backed["rule"]) == ("superseded", "authority")
    assert backed["flagged_for_review"] == 0 and backed["authority"] == "manager"
    # An employee can no longer replace what a manager now states.
    lowered = write(employee, key="office_hours_v3", subject="office_hours", value="8 to 4")
    assert lowered["outcome"] == "proposal"
    # A lower authority restating it changes nothing either.
    same = write(
        employee, status=200, key="office_hours_v4", subject="office_hours", value="9 to 5"
    )
    assert same["outcome"] == "unchanged" and same["key"] == "office_hours_v2"

    write(
        employee, key="price_jan1", subject="price", value="$95", observed_at="2026-01-01T00:00:00Z"
    )
    write(employee, key="forecast", value="flat", depends_on=["price_jan1"])
    later = write(
        employee,
        key="price_jan20",
        subject="price",
        value="$95",
        observed_at="2026-01-20T00:00:00Z",
    )
    assert (later["outcome"], later["rule"], later["flagged_for_review"]) == (
        "superseded",
        "temporal",
        0,
    )
    # So a value observed in between does not win over the later confirmation.
    between = write(
        employee,
        key="price_jan15",
        subject="price",
        value="$100",
        observed_at="2026-01-15T00:00:00Z",
    )
    assert between["outcome"] == "outdated"
    assert employee.get("/facts/price_jan1/current").json()["value"] == "$95"
    assert employee.get("/facts/rota").json()["needs_review"] is False
    assert employee.get("/facts/forecast").json()["needs_review"] is False


def test_an_explicit_supersession_stays_within_its_scope(api, write):
    write(api, key="policy_v1", subject="refund_limit", value="$500")
    write(
        api,
        key="policy_t1",
        subject="refund_limit",
        value="$900",
        scope="task",
        scope_id="T1",
    )

    across = write(
        api,
        status=422,
        key="policy_v2",
        subject="refund_limit",
        value="$1000",
        scope="task",
        scope_id="T2",
        supersedes="policy_t1",
    )
    from_task = write(
        api,
        status=422,
        key="policy_v3",
        subject="refund_limit",
        value="$1000",
        scope="task",
        scope_id="T1",
        supersedes="policy_v1",
    )

    assert across["errors"][0]["loc"] == ["body", "supersedes"]
    assert "own scope" in from_task["detail"]
    assert api.get("/facts/policy_v1/current").json()["value"] == "$500"
    assert api.get("/facts/policy_t1/current").json()["value"] == "$900"
    assert api.get("/facts/policy_v2").status_code == 404


def test_a_read_names_every_fact_it_links_to(api, write):
    """``GET /facts/{key}`` and ``/current`` give the same links as a list of facts does:
    the versions either side, the fact a late write lost to, dependencies both ways."""
    write(api, key="rate_v1", subject="rate", value="3%")
    write(api, key="rate_v2", subject="rate", value="4%", supersedes="rate_v1")
    write(api, key="forecast", subject="forecast", value="up", depends_on=["rate_v2"])
    write(api, key="plan", subject="plan", value="hire", depends_on=["forecast", "rate_v2"])
    write(api, key="price_jan15", subject="price", value="$95", observed_at="2026-01-15T00:00:00Z")
    write(api, key="price_jan1", subject="price", value="$100", observed_at="2026-01-01T00:00:00Z")
    links = ("supersedes", "superseded_by", "contested", "depends_on", "derived_facts")

    def read(path: str) -> tuple:
        body = api.get(path).json()
        return tuple(body[name] for name in links)

    assert read("/facts/rate_v1") == (None, "rate_v2", None, [], [])
    assert read("/facts/rate_v2") == ("rate_v1", None, None, [], ["forecast", "plan"])
    assert read("/facts/forecast") == (None, None, None, ["rate_v2"], ["plan"])
    assert read("/facts/plan") == (None, None, None, ["forecast", "rate_v2"], [])
    # A late older observation is outdated: superseded by, and contesting, the head.
    assert read("/facts/price_jan1") == (None, "price_jan15", "price_jan15", [], [])
    assert read("/facts/rate_v1/current") == read("/facts/rate_v2")
    listed = {f["key"]: f for f in api.get("/facts?valid=any&limit=100").json()["items"]}
    assert len(listed) == 6, sorted(listed)
    for key, fact in listed.items():
        assert read(f"/facts/{key}") == tuple(fact[name] for name in links), key


def test_fact_keys_are_normalized_and_look_alikes_refused(api, write):
    """café typed in NFC or NFD, ﬁle and file: one key each. A zero-width space or a
    Cyrillic а among Latin letters would make a second key that looks the same: 422
    naming the key, nothing stored."""
    first = write(api, key="caf\u00e9_budget", value="10")
    again = write(api, status=200, key="cafe\u0301_budget", value="10")
    assert again["key"] == first["key"] == "caf\u00e9_budget"
    assert again["outcome"] == "unchanged"
    assert write(api, key="\ufb01le_limit", value="5")["key"] == "file_limit"
    assert api.get("/facts/file_limit").status_code == 200
    assert api.get("/facts/\ufb01le_limit").json()["key"] == "file_limit"
    for key, why in (
        ("file\u200b_limit", "invisible"),
        ("p\u0430ypal_limit", "Cyrillic and Latin"),
    ):
        refused = api.post("/facts", {"key": key, "value": "6", "source": "user"})
        assert refused.status_code == 422, refused.content
        body = refused.json()
        assert body["error"] == "validation_error" and why in body["detail"]
        assert repr(key) in body["detail"]
        assert body["errors"][0]["loc"][-1] == "key"
    assert api.get("/facts", {"valid": "any"}).json()["count"] == 2


def test_working_set_keys_are_normalized_and_look_alikes_refused(api):
    session = api.post("/sessions", {}).json()["id"]
    base = f"/sessions/{session}/working-set/"
    listed = f"/sessions/{session}/working-set"
    assert api.put(base + "caf%C3%A9", {"value": 1}).json()["key"] == "caf\u00e9"
    assert api.put(base + "cafe%CC%81", {"value": 2}).json()["key"] == "caf\u00e9"
    assert api.get(base + "cafe%CC%81").json()["value"] == 2
    for key in ("a%E2%80%8Bb", "p%D0%B0ypal"):
        refused = api.put(base + key, {"value": 3})
        assert refused.status_code == 422 and refused.json()["errors"][0]["loc"][-1] == "key"
    assert [i["key"] for i in api.get(listed).json()] == ["caf\u00e9"]
