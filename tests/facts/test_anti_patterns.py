"""Each anti-pattern of seed 001, shown not to happen."""


def _pack_text(api, session, query=""):
    body = api.post(
        f"/sessions/{session.id}/context-pack", {"budget_tokens": 4000, "query": query}
    ).json()
    return body, " ".join(f["text"] for f in body["facts"])


def test_it_never_includes_superseded_facts(api, make_session, write):
    write(api, key="vendor_v1", value="Initech")
    write(api, key="vendor_v2", value="Globochem", supersedes="vendor_v1")
    listed = api.get("/facts").json()
    assert [f["key"] for f in listed["items"]] == ["vendor_v2"]
    _, text = _pack_text(api, make_session(api), "vendor")
    assert "Globochem" in text and "Initech" not in text


def test_it_follows_the_chain_not_the_latest_mention(api, make_session, write):
    write(api, key="address_v1", value="123 Main St")
    write(api, key="address_v2", value="456 Oak Ave", supersedes="address_v1")
    # The old address is mentioned again, last of all: that is not a new fact.
    again = write(api, status=200, key="address_v1", value="123 Main St")
    assert again["outcome"] == "unchanged" and again["is_valid"] is False
    # An older observation arriving last does not win either.
    write(
        api, key="temp_noon", subject="temperature", value="21C", observed_at="2026-05-01T12:00:00Z"
    )
    write(
        api,
        key="temp_morning",
        subject="temperature",
        value="15C",
        observed_at="2026-05-01T08:00:00Z",
    )
    assert api.get("/facts/address_v1/current").json()["value"] == "456 Oak Ave"
    # Observed before the noon reading it arrived after: outdated, and its key leads to
    # the chain's current value (seed 001 rule 4), never to its own stale one.
    assert api.get("/facts/temp_morning/current").json()["value"] == "21C"
    assert api.get("/facts/temp_noon/current").json()["value"] == "21C"
    _, text = _pack_text(api, make_session(api), "address temperature")
    assert "456 Oak Ave" in text and "123 Main St" not in text
    assert "21C" in text and "15C" not in text


def test_it_never_lets_anyone_set_any_fact(make_api, make_session, write):
    policy = make_api(agent="policy-engine", authority="policy")
    guest = make_api(agent="visitor", authority="guest")
    write(policy, key="discount_policy", value="15%", source="policy")
    explicit = guest.post(
        "/facts",
        {
            "key": "discount_policy_v2",
            "value": "50%",
            "source": "user",
            "supersedes": "discount_policy",
        },
    )
    assert explicit.status_code == 403 and explicit.json()["error"] == "authority_too_low"
    implicit = write(guest, key="discount_policy_v3", subject="discount_policy", value="50%")
    assert implicit["outcome"] == "proposal"
    assert guest.get("/facts/discount_policy/current").json()["value"] == "15%"
    assert guest.post("/facts/discount_policy/invalidate").status_code == 403
    _, text = _pack_text(guest, make_session(guest, authority="guest"), "discount")
    assert "15%" in text and "50%" not in text


def test_it_keeps_restricted_facts_out_of_a_lower_authoritys_context(make_api, make_session, write):
    manager = make_api(agent="m", authority="manager")
    write(manager, key="salary_band", value="Band C: 90k", read_authority="manager")
    write(manager, key="office_hours", value="9 to 5")
    _, intern_text = _pack_text(manager, make_session(manager, authority="intern"), "salary")
    assert "90k" not in intern_text and "9 to 5" in intern_text
    _, manager_text = _pack_text(manager, make_session(manager, authority="manager"), "salary")
    assert "90k" in manager_text
