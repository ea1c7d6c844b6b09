"""The Django admin for organizations, agents and keys; projections are read-only there."""

from django.test import Client

from contextops.models import ApiKey
from frames.services.sessions import session_create
from frames.services.stack import frame_push


def _admin(make_user):
    client = Client()
    client.force_login(make_user(username="root", admin=True))
    return client


def test_it_lists_organizations_agents_and_keys(api, make_user):
    client = _admin(make_user)
    for path in (
        "/admin/contextops/organization/",
        "/admin/contextops/agent/",
        "/admin/contextops/apikey/",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
    assert "researcher" in client.get("/admin/contextops/agent/").content.decode()


def test_it_issues_a_key_once_and_revokes_keys(api, make_user):
    client = _admin(make_user)
    response = client.post(
        "/admin/contextops/agent/",
        {"action": "issue_key", "_selected_action": [api.agent.pk]},
    )
    text = response.content.decode()
    assert response.status_code == 200 and "Copy each key now" in text
    raw = text.split('<code class="api-key">')[1].split("</code>")[0]
    assert api.get("/sessions", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    # Shown on its own page once: no cache keeps it, no cookie carries it, the next page
    # does not show it again.
    assert "no-store" in response["Cache-Control"]
    assert all(raw not in morsel.value for morsel in response.cookies.values())
    assert all(raw not in morsel.value for morsel in client.cookies.values())
    assert raw not in client.get("/admin/contextops/agent/").content.decode()

    keys = ApiKey.objects.filter(agent=api.agent)
    client.post(
        "/admin/contextops/apikey/",
        {"action": "revoke", "_selected_action": [k.pk for k in keys]},
        follow=True,
    )
    revoked = api.get("/sessions")
    assert revoked.status_code == 401
    assert revoked.json()["error"] == "unauthenticated"


def test_frames_are_read_only_in_the_admin(api, make_user):
    client = _admin(make_user)
    session = session_create(organization=api.organization, agent=api.agent, identity={})
    frame = frame_push(session=session, goal="Read only", budget_total=100)
    page = client.get(f"/admin/frames/frame/{frame.pk}/change/")
    assert page.status_code == 200
    assert 'name="budget_total"' not in page.content.decode()
    client.post(f"/admin/frames/frame/{frame.pk}/change/", {"budget_total": 999999})
    frame.refresh_from_db()
    assert frame.budget_total == 100
