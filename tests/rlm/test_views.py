"""Dashboard: the list of states and a state page with its rollback button."""

from django.contrib.auth.models import Permission
from django.test import Client

from contextops.models import AuditEntry
from frames.rlm import protocol, snapshots
from frames.rlm.models import RlmState


def _state(org, session=None, **extra):
    return protocol.state_initialize(
        organization=org, prompt="Find errors", session=session, **extra
    )


def test_it_lists_the_organizations_states_only(member_client, org, make_api):
    mine = _state(org)
    other = make_api(org="Globex", agent="x").organization
    theirs = _state(other)
    response = member_client.get("/rlm/")
    html = response.content.decode()
    assert response.status_code == 200
    assert mine.state_id in html and theirs.state_id not in html
    assert 'aria-current="page">RLM states' in html


def test_it_answers_only_the_list_fragment_to_htmx(member_client, org):
    _state(org)
    html = member_client.get(
        "/rlm/", {"status": "incomplete"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="rlm-states"' in html and "<html" not in html


def test_it_shows_variables_log_checkpoints_and_the_session_link(member_client, org, make_session):
    session = make_session()
    state = _state(org, session=session)
    protocol.variable_write(state=state, name="risk_count", value=3, description="Risks found")
    protocol.variable_write(state=state, name="risk_count", value=4)
    protocol.variable_read(state=state, name="risk_count")
    snapshots.checkpoint_create(state=state, name="after_retrieval")
    html = member_client.get(f"/rlm/{state.state_id}/").content.decode()
    assert "risk_count" in html and "Risks found" in html and "number" in html
    assert "mut-00000003" in html and "<code>3</code>" in html and "<code>4</code>" in html
    assert "after_retrieval" in html and "initial_state" in html
    assert f'href="/sessions/{session.id}/"' in html
    assert "Final is not set yet" in html
    # a plain member sees the timeline read-only
    assert "hx-post" not in html and "Read-only" in html


def test_it_answers_404_for_another_organizations_state(member_client, make_api):
    theirs = _state(make_api(org="Globex", agent="x").organization)
    assert member_client.get(f"/rlm/{theirs.state_id}/").status_code == 404
    assert member_client.get("/rlm/state-zzz/").status_code == 404


def _roller(make_user):
    user = make_user(username="rollo")
    user.user_permissions.add(
        Permission.objects.get(codename="rollback_state", content_type__app_label="rlm")
    )
    client = Client()
    client.force_login(user)
    return client


def test_it_rolls_back_with_an_htmx_post_for_a_permitted_user(make_user, org):
    client = _roller(make_user)
    state = _state(org)
    initial = state.checkpoints.get().checkpoint_id
    protocol.variable_write(state=state, name="scratch", value="x")
    html = client.get(f"/rlm/{state.state_id}/").content.decode()
    assert f'hx-post="/rlm/{state.state_id}/rollback/"' in html
    assert "hx-confirm=" in html and "csrfmiddlewaretoken" in html
    response = client.post(
        f"/rlm/{state.state_id}/rollback/", {"checkpoint_id": initial}, HTTP_HX_REQUEST="true"
    )
    fragment = response.content.decode()
    assert response.status_code == 200 and "<html" not in fragment and 'id="rlm-state"' in fragment
    assert f"Rolled back to {initial}" in fragment
    assert not state.variables.filter(name="scratch").exists()
    assert state.mutations.last().operation == "rollback"


def test_a_rollback_in_the_dashboard_is_audited_for_its_organization_only(
    make_user, org, api, audit_page
):
    client = _roller(make_user)
    state = _state(org)
    initial = state.checkpoints.get().checkpoint_id
    protocol.variable_write(state=state, name="scratch", value="x")
    api_rolled = api.post(f"/rlm/states/{state.state_id}/rollback", {"checkpoint_id": initial})
    assert api_rolled.status_code == 200, api_rolled.content
    rolled_back = AuditEntry.objects.filter(action=AuditEntry.Action.STATE_ROLLED_BACK)
    assert not rolled_back.exists()  # an agent's rollback: in the session's events only
    protocol.variable_write(state=state, name="scratch", value="y")
    response = client.post(
        f"/rlm/{state.state_id}/rollback/", {"checkpoint_id": initial}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    entry = rolled_back.get()
    assert (entry.user.username, entry.actor) == ("rollo", "rollo")
    assert entry.organization == org and entry.target == f"RLM state {state.state_id}"
    assert entry.detail["checkpoint_id"] == initial
    assert entry.via == f"POST /rlm/{state.state_id}/rollback/"
    assert f"<td>RLM state {state.state_id}</td>" in audit_page("Acme")
    assert f"<td>RLM state {state.state_id}</td>" not in audit_page("Globex")


def test_it_lets_staff_roll_back_without_the_permission(make_user, org):
    client = Client()
    client.force_login(make_user(username="boss", admin=True))
    state = _state(org)
    protocol.variable_write(state=state, name="scratch", value="x")
    initial = state.checkpoints.get().checkpoint_id
    response = client.post(f"/rlm/{state.state_id}/rollback/", {"checkpoint_id": initial})
    assert response.status_code == 302
    assert not state.variables.filter(name="scratch").exists()


def test_it_refuses_a_rollback_to_a_member_without_permission(member_client, org):
    state = _state(org)
    protocol.variable_write(state=state, name="scratch", value="x")
    initial = state.checkpoints.get().checkpoint_id
    response = member_client.post(f"/rlm/{state.state_id}/rollback/", {"checkpoint_id": initial})
    assert response.status_code == 403
    fragment = member_client.post(
        f"/rlm/{state.state_id}/rollback/", {"checkpoint_id": initial}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "permission" in fragment
    assert state.variables.filter(name="scratch").exists()
    assert not state.mutations.filter(operation="rollback").exists()


def test_it_shows_an_unknown_checkpoint_as_an_error_in_the_fragment(make_user, org):
    client = _roller(make_user)
    state = _state(org)
    fragment = client.post(
        f"/rlm/{state.state_id}/rollback/",
        {"checkpoint_id": "ckpt-00000000"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "No such checkpoint" in fragment
    assert RlmState.objects.get(pk=state.pk).mutation_total == 1


def test_it_requires_login(client):
    assert client.get("/rlm/").status_code == 302


def test_the_session_partial_lists_a_sessions_states(org, make_session):
    from django.template.loader import render_to_string

    from frames.rlm.selectors import state_list

    session = make_session()
    state = _state(org, session=session)
    _state(org)
    html = render_to_string(
        "rlm/partials/_session_states.html",
        {"rlm_states": state_list(organization=org, session_id=str(session.id))},
    )
    assert html.count("/rlm/state-") == 1 and f"/rlm/{state.state_id}/" in html


def test_it_shows_file_backed_values_without_opening_their_files(member_client, org):
    state = _state(org)
    protocol.variable_write(state=state, name="large_document", value="L" * 20_000)
    html = member_client.get(f"/rlm/{state.state_id}/").content.decode()
    assert "large_document" in html and "(stored in a file)" in html and "LLLL" not in html
    assert "19.5\xa0KB" in html or "19.5 KB" in html
