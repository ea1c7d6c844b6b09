"""An organization's admin (``create_user --admin``) administers its own organization in
the Django admin, and sees nothing of another; a superuser administers every one."""

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client

from contextops.models import Agent, ApiKey, AuditEntry, Organization
from facts.models import Fact, SourceAuthority, WorkingSetItem
from facts.services import fact_write
from frames.models import ModelPrice
from frames.services.sessions import session_create
from tests.facts.test_admin import _form

PASSWORD = "pw-for-the-org-admin-1"


@dataclass
class Tenant:
    """One organization's rows, each named so that a page showing it can be recognized."""

    organization: Organization
    agent: Any
    key: ApiKey
    session: Any
    fact: Fact
    audit: AuditEntry


def _tenant(make_api, org: str, agent: str) -> Tenant:
    api = make_api(org=org, agent=agent)
    session = session_create(
        organization=api.organization, agent=api.agent, identity={}, title=f"{org} plan"
    )
    fact = fact_write(
        organization=api.organization,
        key=f"{org.lower()}_discount_policy",
        value="max 15%",
        source="policy",
        authority="policy",
        is_constraint=True,
    ).fact
    return Tenant(
        organization=api.organization,
        agent=api.agent,
        key=ApiKey.objects.get(agent=api.agent),
        session=session,
        fact=fact,
        audit=AuditEntry.objects.get(organization=api.organization),
    )


@pytest.fixture
def acme(make_api) -> Tenant:
    return _tenant(make_api, "Acme", "researcher")


@pytest.fixture
def globex(make_api) -> Tenant:
    return _tenant(make_api, "Globex", "intruder")


@pytest.fixture
def org_admin(db, monkeypatch, acme, globex) -> Client:
    """Alice, made Acme's admin the way an operator does it."""
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    call_command("create_user", "--org", "Acme", "--username", "alice", "--admin", stdout=None)
    client = Client()
    assert client.login(username="alice", password=PASSWORD)
    return client


def _lists(tenant: Tenant) -> dict[str, str]:
    """Each list page, with what shows that ``tenant``'s row is on it."""
    return {
        "/admin/frames/session/": f"{tenant.organization.name} plan",
        "/admin/facts/fact/": tenant.fact.key,
        "/admin/contextops/apikey/": tenant.key.prefix,
        "/admin/contextops/auditentry/": tenant.key.prefix,  # "api key <prefix>" issued
        "/admin/contextops/agent/": tenant.agent.name,
        "/admin/contextops/organization/": tenant.organization.slug,
    }


def _change_pages(tenant: Tenant) -> list[str]:
    return [
        f"/admin/frames/session/{tenant.session.pk}/change/",
        f"/admin/facts/fact/{tenant.fact.pk}/change/",
        f"/admin/facts/fact/{tenant.fact.pk}/history/",
        f"/admin/contextops/apikey/{tenant.key.pk}/change/",
        f"/admin/contextops/auditentry/{tenant.audit.pk}/change/",
        f"/admin/contextops/agent/{tenant.agent.pk}/change/",
        f"/admin/contextops/organization/{tenant.organization.pk}/change/",
    ]


def test_it_lists_only_its_organizations_rows(org_admin, acme, globex):
    for path, acme_row in _lists(acme).items():
        page = org_admin.get(path)
        html = page.content.decode()
        assert page.status_code == 200, path
        assert acme_row in html, path
        assert _lists(globex)[path] not in html, path
        assert "Globex" not in html, path  # not even in a filter by organization


def test_another_organizations_object_answers_404(org_admin, acme, globex):
    for path in _change_pages(globex):
        assert org_admin.get(path).status_code == 404, path
    for path in _change_pages(acme):
        assert org_admin.get(path).status_code == 200, path


def test_what_it_creates_belongs_to_its_organization(org_admin, acme, globex):
    form = org_admin.get("/admin/facts/sourceauthority/add/").content.decode()
    assert "Acme" in form and "Globex" not in form
    response = org_admin.post(
        "/admin/facts/sourceauthority/add/",
        {"organization": globex.organization.pk, "source": "CFO", "level": "policy"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert SourceAuthority.objects.get(source="CFO").organization == acme.organization

    fact = {
        "organization": globex.organization.pk,
        "key": "holiday_rule",
        "scope": "global",
        "scope_id": "",
        "memory_type": "",
        **_form(Fact(source="policy"), value='"before 2026-12-20"', subject="holidays"),
    }
    response = org_admin.post("/admin/facts/fact/add/", fact)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Fact.objects.get(key="holiday_rule").organization == acme.organization

    response = org_admin.post(
        "/admin/facts/workingsetitem/add/",
        {"session": globex.session.pk, "key": "note", "value": '"x"', "tokens": 0},
    )
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not WorkingSetItem.objects.exists()


def test_its_actions_touch_only_its_organizations_rows(org_admin, acme, globex):
    org_admin.post(
        "/admin/facts/fact/",
        {"action": "invalidate_selected", "_selected_action": [globex.fact.pk]},
    )
    org_admin.post(
        "/admin/contextops/apikey/", {"action": "revoke", "_selected_action": [globex.key.pk]}
    )
    org_admin.post(
        "/admin/contextops/agent/", {"action": "issue_key", "_selected_action": [globex.agent.pk]}
    )
    globex.fact.refresh_from_db()
    globex.key.refresh_from_db()
    assert globex.fact.is_valid and globex.key.revoked_at is None
    assert ApiKey.objects.filter(agent=globex.agent).count() == 1


def test_it_edits_its_own_policy_facts_and_never_anothers(org_admin, acme, globex):
    response = org_admin.post(
        f"/admin/facts/fact/{acme.fact.pk}/change/", _form(acme.fact, value='"max 10%"')
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    new = Fact.objects.get(supersedes=acme.fact)
    assert (new.value, new.authority, new.author) == ("max 10%", "policy", "admin:alice")
    assert new.organization == acme.organization

    response = org_admin.post(
        f"/admin/facts/fact/{globex.fact.pk}/change/", _form(globex.fact, value='"max 90%"')
    )
    assert response.status_code == 404
    assert not Fact.objects.filter(supersedes=globex.fact).exists()


def test_it_shows_model_prices_and_leaves_changing_them_to_superusers(org_admin, prices):
    listed = org_admin.get("/admin/frames/modelprice/")
    assert listed.status_code == 200 and "claude-sonnet-4-6" in listed.content.decode()
    assert "Model prices" in org_admin.get("/admin/").content.decode()
    price = ModelPrice.objects.get(model="claude-sonnet-4-6")
    page = org_admin.get(f"/admin/frames/modelprice/{price.pk}/change/").content.decode()
    assert "View model price" in page and 'name="input_per_mtok"' not in page  # read only
    refused = org_admin.post(
        f"/admin/frames/modelprice/{price.pk}/change/",
        {"model": price.model, "provider": price.provider, "input_per_mtok": "0"},
    )
    assert refused.status_code == 403
    price.refresh_from_db()
    assert price.input_per_mtok == 3
    assert org_admin.get("/admin/frames/modelprice/add/").status_code == 403


def test_a_superuser_sees_every_organization(acme, globex):
    get_user_model().objects.create_superuser("root", password=PASSWORD)
    client = Client()
    assert client.login(username="root", password=PASSWORD)
    for path in _lists(acme):
        html = client.get(path).content.decode()
        assert _lists(acme)[path] in html and _lists(globex)[path] in html, path
    for path in _change_pages(globex):
        assert client.get(path).status_code == 200, path


def test_a_staff_user_of_no_organization_sees_nothing(acme):
    user = get_user_model().objects.create_user("drifter", password=PASSWORD, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_auditentry"))
    AuditEntry.objects.create(actor="manage.py", action="api_key.issued", target="no org's")
    client = Client()
    assert client.login(username="drifter", password=PASSWORD)
    page = client.get("/admin/contextops/auditentry/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "no org&#x27;s" not in html and acme.key.prefix not in html


def test_it_deletes_its_own_agents_whose_sessions_stay(org_admin, acme, globex):
    refused = org_admin.post(f"/admin/contextops/agent/{globex.agent.pk}/delete/", {"post": "yes"})
    assert refused.status_code == 404
    assert Agent.objects.filter(pk=globex.agent.pk).exists()

    page = org_admin.get(f"/admin/contextops/agent/{acme.agent.pk}/change/").content.decode()
    assert f"/admin/contextops/agent/{acme.agent.pk}/delete/" in page
    deleted = org_admin.post(f"/admin/contextops/agent/{acme.agent.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302, deleted.content.decode()[:2000]
    assert not Agent.objects.filter(pk=acme.agent.pk).exists()
    assert not ApiKey.objects.filter(pk=acme.key.pk).exists()  # its keys no longer open anything
    acme.session.refresh_from_db()
    assert acme.session.agent_id is None  # the work it did stays
    entry = AuditEntry.objects.get(action=AuditEntry.Action.ADMIN_DELETED)
    assert entry.organization_id == acme.organization.pk
    assert entry.detail["model"] == "contextops.agent"
    assert entry.detail["object"] == "researcher (Acme)"


def test_admins_made_before_agents_could_be_deleted_may_delete_them_after_migrating(acme):
    from importlib import import_module

    from django.apps import apps

    from contextops.tenancy import user_create

    migration = import_module("contextops.migrations.0006_organization_admins_delete_agents")
    delete = Permission.objects.get(content_type__app_label="contextops", codename="delete_agent")
    earlier = user_create(org_name="Acme", username="earlier", password=PASSWORD, admin=True)
    earlier.user_permissions.remove(delete)  # as create_user --admin made them before
    member = user_create(org_name="Acme", username="member", password=PASSWORD)
    member.is_staff = True
    member.save()
    root = get_user_model().objects.create_superuser("root", password=PASSWORD)

    migration.grant(apps, None)

    fresh = get_user_model().objects.get
    assert fresh(pk=earlier.pk).has_perm("contextops.delete_agent")
    assert not fresh(pk=member.pk).user_permissions.filter(pk=delete.pk).exists()
    assert not fresh(pk=root.pk).user_permissions.filter(pk=delete.pk).exists()
