"""HTML that agents write (goals, fact values, handle content) is shown as text; no script runs."""

import pytest
from playwright.sync_api import expect

from facts.services import fact_write
from frames.services.handles import handle_add
from frames.services.sessions import session_create
from frames.services.stack import frame_push
from tests.browser.conftest import login

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOADS = [
    "<img src=x onerror=\"document.title='pwned'\">",
    "<script>document.title='pwned'</script>",
    "<svg onload=\"document.title='pwned'\"></svg>",
]


def test_agent_written_html_never_runs_in_the_dashboard(page, person, api):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    session = session_create(
        organization=api.organization,
        agent=api.agent,
        identity={"user_name": PAYLOADS[0]},
        title=PAYLOADS[1],
    )
    root = frame_push(session=session, goal=PAYLOADS[0], budget_total=10_000)
    handle_add(frame=root, kind="document", content=PAYLOADS[2])
    for i, payload in enumerate(PAYLOADS):
        fact_write(
            organization=api.organization,
            key=f"evil_{i}",
            value=payload,
            source="user",
            authority="employee",
        )

    login(page, person.username)
    for url in (
        "/",
        f"/sessions/{session.pk}/",
        f"/frames/{root.pk}/",
        "/facts/",
        "/facts/evil_0/lineage/",
    ):
        page.goto(url)
        page.wait_for_load_state("networkidle")
        assert page.title() != "pwned", url
    page.goto(f"/frames/{root.pk}/")
    expect(page.get_by_role("heading", level=1)).to_have_text(PAYLOADS[0])
    page.goto("/facts/")
    expect(page.get_by_text(PAYLOADS[1]).first).to_be_visible()
    assert dialogs == []
    assert (
        page.evaluate(
            "document.querySelectorAll('main script, main img[src=x], main svg[onload]').length"
        )
        == 0
    )
