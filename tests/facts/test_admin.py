"""Admins edit facts as new versions, and invalidate instead of deleting."""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from facts.models import Fact
from facts.services import fact_write


@pytest.fixture
def admin_client(make_user):
    client = Client()
    client.force_login(make_user(username="root", admin=True))
    return client


@pytest.fixture
def policy(api):
    return fact_write(
        organization=api.organization,
        key="discount_policy",
        value="max 15%",
        source="policy",
        authority="policy",
        is_constraint=True,
    ).fact


def _form(fact, **changes):
    data = {
        "subject": fact.subject,
        "value": '"max 15%"',
        "source": fact.source,
        "observed_at_0": "",
        "observed_at_1": "",
        "is_constraint": "on" if fact.is_constraint else "",
        "constraint_type": fact.constraint_type,
        "constraint": "null",
        "read_authority": fact.read_authority,
    }
    data.update(changes)
    return data


def test_it_saves_an_edit_as_a_new_version(admin_client, policy):
    response = admin_client.post(
        f"/admin/facts/fact/{policy.pk}/change/", _form(policy, value='"max 10%"')
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    policy.refresh_from_db()
    assert policy.value == "max 15%" and policy.is_valid is False and policy.status == "superseded"
    new = Fact.objects.get(supersedes=policy)
    assert new.value == "max 10%" and new.key == "discount_policy_v2"
    assert (
        new.author == "admin:root"
        and new.supersession_rule == "admin_edit"
        and new.authority == "policy"
    )
    assert new.constraint == {"max": 10, "unit": "%"}


def test_it_refuses_to_edit_a_superseded_version(admin_client, policy):
    admin_client.post(f"/admin/facts/fact/{policy.pk}/change/", _form(policy, value='"max 10%"'))
    response = admin_client.post(
        f"/admin/facts/fact/{policy.pk}/change/", _form(policy, value='"max 5%"')
    )
    assert response.status_code == 200 and "only the current version" in response.content.decode()
    assert Fact.objects.count() == 2


def test_it_refuses_an_edit_over_a_higher_authority_and_saves_nothing(make_user, policy):
    staff = make_user(username="clerk")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_fact", "change_fact"])
    )
    client = Client()
    client.force_login(staff)  # not a superuser: writes with admin authority, below policy
    response = client.post(
        f"/admin/facts/fact/{policy.pk}/change/", _form(policy, value='"max 30%"')
    )
    html = response.content.decode()
    assert response.status_code == 200 and "lower authority never supersedes" in html
    assert "Nothing was saved" in html
    assert list(Fact.objects.values_list("key", "status")) == [("discount_policy", "active")]


def test_it_adds_a_fact_through_the_service(admin_client, api):
    data = {
        "organization": api.organization.pk,
        "key": "holiday_rule",
        "scope": "global",
        "scope_id": "",
        "memory_type": "",
        **_form(
            Fact(source="policy"),
            value='"before 2026-12-20"',
            subject="holidays",
            is_constraint="on",
        ),
    }
    response = admin_client.post("/admin/facts/fact/add/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    fact = Fact.objects.get(key="holiday_rule")
    assert fact.memory_type == "organizational" and fact.constraint == {"before": "2026-12-20"}
    assert fact.tokens > 0 and fact.author == "admin:root"


def test_it_replaces_delete_with_invalidation(admin_client, policy):
    assert admin_client.get(f"/admin/facts/fact/{policy.pk}/delete/").status_code in (302, 403)
    response = admin_client.post(
        "/admin/facts/fact/", {"action": "invalidate_selected", "_selected_action": [policy.pk]}
    )
    assert response.status_code == 302
    policy.refresh_from_db()
    assert policy.status == "invalidated" and policy.is_valid is False
    assert Fact.objects.filter(pk=policy.pk).exists()


def test_it_caps_a_facts_authority_at_its_sources_level(admin_client, make_api):
    from facts.models import SourceAuthority

    policy_bot = make_api(agent="relay", authority="policy")
    response = admin_client.post(
        "/admin/facts/sourceauthority/add/",
        {"organization": policy_bot.organization.pk, "source": "customer_chat", "level": "guest"},
    )
    assert response.status_code == 302
    assert SourceAuthority.objects.get(source="customer_chat").level == "guest"
    relayed = policy_bot.post(
        "/facts", {"key": "wish", "value": "free shipping", "source": "Customer_Chat"}
    ).json()
    assert relayed["authority"] == "guest"
    own = policy_bot.post("/facts", {"key": "rule", "value": "max 15%", "source": "policy"}).json()
    assert own["authority"] == "policy"
    # A source mapped above the writer never lifts the writer.
    SourceAuthority.objects.create(
        organization=policy_bot.organization, source="CFO", level="admin"
    )
    intern = make_api(agent="i", authority="intern")
    assert (
        intern.post("/facts", {"key": "cfo_says", "value": "x", "source": "CFO"}).json()[
            "authority"
        ]
        == "intern"
    )


def test_it_refuses_a_level_off_the_ladder(admin_client, api):
    response = admin_client.post(
        "/admin/facts/sourceauthority/add/",
        {"organization": api.organization.pk, "source": "CFO", "level": "emperor"},
    )
    assert response.status_code == 200 and "ladder" in response.content.decode()


def test_it_refuses_nul_characters_from_the_admin(admin_client, policy):
    response = admin_client.post(
        f"/admin/facts/fact/{policy.pk}/change/", _form(policy, value='"max \\u0000 10%"')
    )
    html = response.content.decode()
    assert response.status_code == 200 and ("NUL" in html or "Null characters" in html), html[:300]
    assert Fact.objects.count() == 1
