"""Seed 001's three test vectors and its rule examples, through the API."""


def _pack(api, session, query):
    response = api.post(
        f"/sessions/{session.id}/context-pack", {"budget_tokens": 4000, "query": query}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    return body, " ".join(f["text"] for f in body["facts"])


def test_it_passes_vector_1_basic_supersession(api, make_session, write):
    write(api, key="status_v1", value="approved")
    write(api, key="status_v2", value="cancelled", supersedes="status_v1")
    _, text = _pack(api, make_session(api), "What is the current status?")
    assert "cancelled" in text
    assert "approved" not in text


def test_it_passes_vector_2_emphatic_repetition(api, make_session, write):
    first = write(api, key="order_v1", value="approved")
    for _ in range(2):  # mentioned 3x in all: the same key and value again change nothing
        again = write(api, status=200, key="order_v1", value="approved")
        assert again["outcome"] == "unchanged" and again["id"] == first["id"]
    second = write(api, key="order_v2", value="cancelled", supersedes="order_v1")
    assert second["outcome"] == "superseded" and second["rule"] == "explicit"

    current = api.get("/facts/order_v1/current").json()
    assert current["key"] == "order_v2" and current["value"] == "cancelled"
    proceed = current["value"] == "approved"
    assert proceed is False  # Decision: NO
    assert api.get("/facts", {"subject": "order", "valid": "any"}).json()["count"] == 2
    _, text = _pack(api, make_session(api), "Should we proceed with the order?")
    assert "cancelled" in text and "approved" not in text


def test_it_passes_vector_3_authority_override(make_api, make_session, write):
    cfo = make_api(agent="cfo-office", authority="admin")
    intern = make_api(agent="intern-bot", authority="intern")
    policy = write(
        cfo,
        key="policy",
        value="max 15%",
        source="CFO",
        subject="discount",
        is_constraint=True,
        constraint_type="policy",
    )
    assert policy["constraint"] == {"max": 15, "unit": "%"} and policy["authority"] == "admin"

    # "Let's offer 25%": kept as the intern's proposal, never current.
    offer = write(intern, key="offer_v1", value="25%", subject="discount")
    assert offer["outcome"] == "proposal" and offer["is_valid"] is False
    assert offer["contested"] == "policy" and "higher authority" in offer["notice"]
    # Asked explicitly, the answer is 403.
    denied = intern.post(
        "/facts", {"key": "offer_v2", "value": "25%", "source": "user", "supersedes": "policy"}
    )
    assert denied.status_code == 403 and denied.json()["error"] == "authority_too_low"
    assert cfo.get("/facts/policy/current").json()["value"] == "max 15%"

    # "Can we offer 25%?"  Decision: NO, citing the policy.
    check = intern.post("/constraints/check", {"subject": "discount", "value": "25%"}).json()
    assert check["allowed"] is False
    assert check["violations"][0]["fact_key"] == "policy"
    assert "above the maximum of 15%" in check["violations"][0]["detail"]

    session = make_session(intern, authority="intern")
    body, text = _pack(intern, session, "Can we offer 25%?")
    assert "policy" in [f["key"] for f in body["facts"]]
    assert "max 15%" in text and "25%" not in text


def test_it_follows_rule_1_the_address_example(api, write):
    write(api, key="address_v1", value="123 Main St")
    moved = write(api, key="address_v2", value="456 Oak Ave", supersedes="address_v1")
    assert moved["supersedes"] == "address_v1" and moved["rule"] == "explicit"
    old = api.get("/facts/address_v1").json()
    assert old["is_valid"] is False and old["superseded_by"] == "address_v2"
    assert api.get("/facts/address_v1/current").json()["value"] == "456 Oak Ave"


def test_it_follows_rule_2_the_meeting_example(api, write):
    write(api, key="meeting_tuesday", subject="meeting", value="Tuesday at 2pm")
    moved = write(api, key="meeting_thursday", subject="meeting", value="Thursday at 3pm")
    assert moved["outcome"] == "superseded" and moved["rule"] == "implicit"
    assert moved["supersedes"] == "meeting_tuesday"
    valid = api.get("/facts", {"subject": "meeting"}).json()
    assert [f["value"] for f in valid["items"]] == ["Thursday at 3pm"]


def test_it_follows_rule_3_policy_supersedes_an_employee(make_api, write):
    employee = make_api(agent="sales", authority="employee")
    policy = make_api(agent="policy-engine", authority="policy")
    write(employee, key="discount_offer", subject="discount", value="We can offer 25% discount")
    ruling = write(
        policy,
        key="discount_policy",
        subject="discount",
        value="Max discount is 15%",
        source="policy",
    )
    assert ruling["outcome"] == "superseded" and ruling["rule"] == "authority"
    assert ruling["memory_type"] == "organizational"
    assert employee.get("/facts/discount_offer/current").json()["key"] == "discount_policy"


def test_it_follows_rule_4_the_stock_price_example(api, write):
    write(
        api,
        key="stock_jan1",
        subject="stock_price",
        value="$100",
        observed_at="2026-01-01T00:00:00Z",
    )
    later = write(
        api,
        key="stock_jan15",
        subject="stock_price",
        value="$95",
        observed_at="2026-01-15T00:00:00Z",
    )
    assert later["rule"] == "temporal" and later["supersedes"] == "stock_jan1"
    assert api.get("/facts/stock_jan1/current").json()["value"] == "$95"


def test_it_lets_the_later_observation_win_when_it_arrived_first(api, write):
    write(
        api,
        key="stock_jan15",
        subject="stock_price",
        value="$95",
        observed_at="2026-01-15T00:00:00Z",
    )
    late = write(
        api,
        key="stock_jan1",
        subject="stock_price",
        value="$100",
        observed_at="2026-01-01T00:00:00Z",
    )
    assert late["outcome"] == "outdated" and late["is_valid"] is False
    assert late["contested"] == "stock_jan15"
    assert api.get("/facts/stock_jan15/current").json()["value"] == "$95"


def test_a_late_older_observation_leads_to_the_current_value(api, write):
    write(api, key="rate_jan15", subject="rate", value="4%", observed_at="2026-01-15T00:00:00Z")
    late = write(
        api, key="rate_jan1", subject="rate", value="3%", observed_at="2026-01-01T00:00:00Z"
    )
    assert (late["outcome"], late["superseded_by"]) == ("outdated", "rate_jan15")

    current = api.get("/facts/rate_jan1/current")
    assert (current.status_code, current.json()["key"], current.json()["value"]) == (
        200,
        "rate_jan15",
        "4%",
    )
    # Once the head moves on, the late observation still leads to the chain's current value.
    write(api, key="rate_feb1", subject="rate", value="5%", observed_at="2026-02-01T00:00:00Z")
    assert api.get("/facts/rate_jan1/current").json()["key"] == "rate_feb1"
    lineage = api.get("/facts/rate_jan15/lineage").json()
    assert [c["key"] for c in lineage["contested"]] == ["rate_jan1"]


def test_an_observation_from_the_future_is_refused_and_changes_nothing(api, write):
    """A later observation wins its subject, so one dated ahead of now would outrank every
    correction until then: it is a 422 naming observed_at, and nothing is stored."""
    write(api, key="stock_now", subject="stock", value=5, observed_at="2026-01-01T00:00:00Z")
    body = write(
        api,
        status=422,
        key="stock_far",
        subject="stock",
        value=9,
        observed_at="3000-01-01T00:00:00Z",
    )
    assert body["error"] == "validation_error"
    assert body["errors"][0]["loc"] == ["body", "observed_at"]
    assert "future" in body["errors"][0]["msg"]
    assert api.get("/facts/stock_far").status_code == 404
    assert api.get("/facts/stock_now/current").json()["key"] == "stock_now"
