"""Seed 001 rule 1's keyword detection, and facts that need a permission to be read."""

import pytest

from facts.supersession import explicit_keywords

from .test_anti_patterns import _pack_text


@pytest.mark.parametrize(
    ("words", "found"),
    [
        ("I moved to 456 Oak Ave", ["moved"]),
        ("Actually, the meeting is on Thursday instead", ["actually", "instead"]),
        ("Correction: NEW number is 555-0100", ["correction", "new"]),
        ("My address is 123 Main St", []),
        ("The renewal is knowingly unchanged", []),  # words, not substrings
    ],
)
def test_it_finds_rule_ones_keywords(words, found):
    assert explicit_keywords(words) == found


def test_the_users_words_make_a_write_an_explicit_supersession(api, write):
    write(api, key="address_v1", subject="address", value="123 Main St", source="user")

    moved = write(
        api,
        key="address_home",
        subject="address",
        value="456 Oak Ave",
        source="user",
        utterance="I moved to 456 Oak Ave",
    )

    assert (moved["outcome"], moved["rule"], moved["supersedes"]) == (
        "superseded",
        "explicit",
        "address_v1",
    )
    assert moved["detected_keywords"] == ["moved"]
    assert api.get("/facts/address_v1/current").json()["value"] == "456 Oak Ave"


def test_words_without_a_keyword_leave_the_rules_as_they_are(api, write):
    write(api, key="meeting_v1", subject="meeting", value="Tuesday 2pm", source="user")
    later = write(
        api,
        key="meeting_v2",
        subject="meeting",
        value="Thursday 3pm",
        source="user",
        utterance="Let's do the meeting Thursday at 3pm",
    )
    assert (later["rule"], later["detected_keywords"]) == ("implicit", [])


def test_a_context_leaves_out_facts_whose_permission_the_identity_lacks(api, write, make_session):
    write(api, key="salary_band", value="Band 7 pays 90k", read_permission="read:salaries")
    write(api, key="holiday_policy", value="25 days of leave")
    plain = make_session(api)
    cleared = make_session(
        api,
        identity={"user_name": "Hal", "authority": "employee", "permissions": ["read:salaries"]},
    )

    _, plain_text = _pack_text(api, plain)
    _, cleared_text = _pack_text(api, cleared)

    assert "25 days" in plain_text and "Band 7" not in plain_text
    assert "25 days" in cleared_text and "Band 7" in cleared_text
    assert api.get("/facts/salary_band").json()["read_permission"] == "read:salaries"
