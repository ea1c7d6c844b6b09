"""The compaction form without JavaScript: a plain form POST, and a page that answers it."""

import pytest
from playwright.sync_api import expect

from contextops.models import Organization
from frames.conversation.ingest import messages_append
from frames.services.sessions import session_create
from tests.browser.conftest import login

pytestmark = pytest.mark.django_db(transaction=True)


def test_without_javascript_a_refused_compaction_shows_why_and_its_address_still_opens(
    browser, live_server, person
):
    session = session_create(
        organization=Organization.objects.get(name="Acme"),
        identity={"user_name": "Ada", "user_id": "u1"},
        context_window_tokens=200_000,
    )
    messages_append(  # one turn: a session without any offers no form (nothing to compact)
        session=session,
        messages=[
            {"role": "user", "content": "Shorten the log"},
            {"role": "assistant", "content": [{"type": "text", "text": "Shortened."}]},
        ],
    )
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(15_000)
    login(page, person.username)
    page.goto(f"/sessions/{session.pk}/turns/")
    page.get_by_label("Strategy").select_option("truncate_at")
    page.get_by_role("button", name="Compact now").click()
    expect(page.get_by_role("alert")).to_contain_text("truncate_at needs keep_turns")
    form_address = page.url
    assert form_address.endswith("/turns/compactions/start/")

    # A reload sends the form again and shows why again; a revisit is a GET of the address.
    reloaded = page.reload()
    assert reloaded.status == 422 and reloaded.request.method == "POST"
    expect(page.get_by_role("alert")).to_contain_text("truncate_at needs keep_turns")
    revisited = page.goto(form_address)
    assert revisited.status == 200 and page.url.endswith(f"/sessions/{session.pk}/turns/")
    expect(page.get_by_role("button", name="Compact now")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_count(0)
    context.close()
