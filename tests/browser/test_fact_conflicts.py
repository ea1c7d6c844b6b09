"""The review queue of proposed supersessions in a real Chromium: a person accepts one,
rejects one and says a third is not the same thing; the facts follow the decisions."""

import pytest
from playwright.sync_api import expect

from facts.models import FactConflict
from tests.browser.conftest import PASSWORD, login, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def _pair(api, first: tuple[str, str], second: tuple[str, str]) -> int:
    assert (
        api.post("/facts", {"key": first[0], "value": first[1], "source": "user"}).status_code
        == 201
    )
    body = api.post("/facts", {"key": second[0], "value": second[1], "source": "user"}).json()
    (proposal,) = body["proposed_conflicts"]
    return proposal["id"]


def test_a_person_accepts_rejects_and_says_not_the_same_thing(page, make_user, api):
    make_user(username="grace", approver=True, password=PASSWORD)
    meeting = _pair(api, ("meeting_day", "Tuesday 2pm"), ("sync_meeting", "Thursday 3pm"))
    wifi = _pair(api, ("wifi_password", "sunflower42"), ("office_wifi_password", "bluebird77"))
    flight = _pair(
        api, ("flight_to_tokyo", "AF276 on April 2"), ("tokyo_flight", "JL46 on April 3")
    )

    login(page, "grace")
    page.get_by_role("link", name="Fact conflicts").click()
    expect(page.get_by_role("heading", name="Fact conflicts")).to_be_visible()
    rows = page.locator("#conflict-queue tbody tr")
    expect(rows).to_have_count(3)
    row = page.locator(f"#conflict-{meeting}")
    expect(row).to_contain_text("Thursday 3pm")
    expect(row).to_contain_text("Tuesday 2pm")
    expect(row).to_contain_text("meeting")
    screenshot(page, "fact-conflicts")

    row.get_by_role("button", name="Accept").click()
    expect(page.locator(f"#conflict-{meeting}")).to_have_count(0)
    page.locator(f"#conflict-{wifi}").get_by_role("button", name="Reject").click()
    expect(page.locator(f"#conflict-{wifi}")).to_have_count(0)
    page.locator(f"#conflict-{flight}").get_by_role("button", name="Not the same thing").click()
    expect(page.get_by_text("No proposal waits for a decision.")).to_be_visible()
    decided = page.locator("#decided-conflicts")
    expect(decided).to_contain_text("accepted by grace")
    expect(decided).to_contain_text("rejected by grace")
    expect(decided).to_contain_text("not the same thing by grace")

    assert api.get("/facts/meeting_day/current").json()["value"] == "Thursday 3pm"
    assert api.get("/facts/wifi_password/current").json()["key"] == "wifi_password"
    assert api.get("/facts/tokyo_flight/current").json()["key"] == "tokyo_flight"
    statuses = dict(FactConflict.objects.values_list("pk", "status"))
    assert statuses == {meeting: "accepted", wifi: "rejected", flight: "distinct"}
    assert FactConflict.objects.get(pk=meeting).decided_by.username == "grace"
    assert page.console_errors == []


def test_a_member_without_the_permission_sees_the_queue_read_only(page, make_user, api):
    make_user(username="mo", password=PASSWORD)
    _pair(api, ("meeting_day", "Tuesday 2pm"), ("sync_meeting", "Thursday 3pm"))
    login(page, "mo")
    page.goto("/facts/conflicts/")
    expect(page.locator("#conflict-queue tbody tr")).to_have_count(1)
    expect(page.get_by_role("button", name="Accept")).to_have_count(0)
    expect(page.get_by_text("Deciding needs")).to_be_visible()
