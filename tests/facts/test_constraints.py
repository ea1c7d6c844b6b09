"""POST /constraints/check for each kind of machine-checkable constraint."""

import pytest


@pytest.mark.parametrize(
    ("constraint", "allowed", "refused"),
    [
        ({"max": 15, "unit": "%"}, "15%", "25%"),
        ({"min": 3}, 3, 2),
        ({"allowed": ["EUR", "USD"]}, "EUR", "GBP"),
        ({"before": "2026-03-01"}, "2026-02-15", "2026-03-02"),
    ],
)
def test_it_checks_a_proposed_value(api, write, constraint, allowed, refused):
    write(
        api,
        key="rule",
        subject="thing",
        value="the rule",
        is_constraint=True,
        constraint=constraint,
    )
    ok = api.post("/constraints/check", {"subject": "thing", "value": allowed}).json()
    assert ok == {
        "subject": "thing",
        "value": allowed,
        "allowed": True,
        "checked": ["rule"],
        "violations": [],
    }
    bad = api.post("/constraints/check", {"subject": "thing", "value": refused}).json()
    assert bad["allowed"] is False
    assert (
        bad["violations"][0]["fact_key"] == "rule"
        and bad["violations"][0]["constraint"] == constraint
    )
    assert bad["violations"][0]["detail"]


def test_it_ignores_superseded_and_hypothetical_constraints(api, write):
    write(api, key="cap_v1", subject="headcount", value="max 5", is_constraint=True)
    write(
        api,
        key="cap_v2",
        subject="headcount",
        value="max 10",
        is_constraint=True,
        supersedes="cap_v1",
    )
    write(
        api,
        key="cap_what_if",
        subject="headcount",
        value="max 2",
        is_constraint=True,
        scope="hypothetical",
        scope_id="t",
    )
    check = api.post("/constraints/check", {"subject": "headcount", "value": 7}).json()
    assert check["allowed"] is True and check["checked"] == ["cap_v2"]


def test_it_applies_task_constraints_only_for_their_task(api, write):
    write(
        api,
        key="task_cap",
        subject="spend",
        value="max 100",
        is_constraint=True,
        scope="task",
        scope_id="t1",
    )
    assert (
        api.post("/constraints/check", {"subject": "spend", "value": 500}).json()["allowed"] is True
    )
    scoped = api.post(
        "/constraints/check", {"subject": "spend", "value": 500, "scope_id": "t1"}
    ).json()
    assert scoped["allowed"] is False


def test_it_answers_422_for_a_malformed_check(api):
    assert api.post("/constraints/check", {"value": 1}).status_code == 422
    assert api.post("/constraints/check", {"subject": "", "value": 1}).status_code == 422
    assert api.post("/constraints/check", {"subject": "x"}).status_code == 422


def test_a_written_policy_constraint_is_kept_but_never_checked(api, write):
    """`is_constraint` with a value that states no bound: a policy in words. It is stored
    as a constraint with no machine-checkable form, and a check says it did not check it."""
    fact = write(
        api,
        key="vendor_rule",
        subject="vendor",
        value="Every vendor must be approved by procurement",
        is_constraint=True,
    )
    assert fact["is_constraint"] is True and fact["constraint"] is None
    check = api.post("/constraints/check", {"subject": "vendor", "value": "Initech"}).json()
    assert check["allowed"] is True and check["checked"] == [] and check["violations"] == []
    bounded = write(
        api, key="vendor_cap", subject="vendor_count", value="max 3", is_constraint=True
    )
    assert bounded["constraint"] == {"max": 3}
