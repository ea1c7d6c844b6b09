"""``create_api_key`` and ``create_user``, run as an operator runs them."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from contextops.models import Agent, ApiKey, Organization
from tests.conftest import ApiClient

PASSWORD = "pw-from-the-environment-1"


def _create_api_key(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_key", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_the_key_alone_on_the_last_line(db):
    out, err = _create_api_key("--org", "Acme", "--agent", "planner", "--authority", "manager")
    last = out.splitlines()[-1]
    assert last == last.strip() and last.startswith("cops_") and " " not in last
    assert last not in err
    assert ApiClient(key=last).get("/sessions").status_code == 200
    agent = Agent.objects.get(name="planner", organization__name="Acme")
    assert agent.authority == "manager"


def test_it_says_when_it_creates_an_organization_no_dashboard_user_sees(db):
    _, err = _create_api_key("--org", "Acme", "--agent", "planner")
    assert "Created organization 'Acme'" in err and "create_user --org Acme" in err
    _, again = _create_api_key("--org", "Acme", "--agent", "auditor")
    assert "Created organization" not in again  # an existing one is only named


def test_it_issues_another_key_for_an_existing_agent(db):
    first, _ = _create_api_key("--org", "Acme", "--agent", "planner", "--authority", "manager")
    second, _ = _create_api_key("--org", "Acme", "--agent", "planner")
    assert first.splitlines()[-1] != second.splitlines()[-1]
    assert ApiKey.objects.filter(agent__name="planner").count() == 2
    assert Agent.objects.get(name="planner").authority == "manager"


def test_it_refuses_an_authority_off_the_ladder(db):
    with pytest.raises(CommandError, match="Unknown authority 'boss'.*policy, admin, manager"):
        _create_api_key("--org", "Acme", "--agent", "planner", "--authority", "boss")
    assert not Organization.objects.filter(name="Acme").exists()


def test_it_checks_the_authority_against_the_organizations_own_ladder(db):
    Organization.objects.create(name="Initech", slug="initech", authority_ladder=["board", "staff"])
    with pytest.raises(CommandError, match="Unknown authority 'manager'"):
        _create_api_key("--org", "Initech", "--agent", "bot", "--authority", "manager")
    _create_api_key("--org", "Initech", "--agent", "bot", "--authority", "board")
    assert Agent.objects.get(name="bot").authority == "board"
    # Without --authority a new agent gets the ladder's lowest level when it has no employee.
    _create_api_key("--org", "Initech", "--agent", "helper")
    assert Agent.objects.get(name="helper").authority == "staff"


def test_it_never_changes_an_existing_agents_authority_silently(db):
    _create_api_key("--org", "Acme", "--agent", "planner", "--authority", "employee")
    with pytest.raises(CommandError, match="already has authority employee.*--update-authority"):
        _create_api_key("--org", "Acme", "--agent", "planner", "--authority", "admin")
    assert Agent.objects.get(name="planner").authority == "employee"
    assert ApiKey.objects.filter(agent__name="planner").count() == 1

    out, err = _create_api_key(
        "--org", "Acme", "--agent", "planner", "--authority", "admin", "--update-authority"
    )
    assert Agent.objects.get(name="planner").authority == "admin"
    assert "authority admin" in err
    assert ApiClient(key=out.splitlines()[-1]).get("/facts").status_code == 200


def _create_user(*args: str) -> str:
    out = io.StringIO()
    call_command("create_user", *args, stdout=out)
    return out.getvalue()


def test_it_creates_a_user_who_logs_in_with_the_password_from_the_environment(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    _create_user("--org", "Acme", "--username", "ada")
    user = get_user_model().objects.get(username="ada")
    assert user.member.organization.name == "Acme"
    assert not user.is_staff and not user.has_perm("frames.approve_suspension")

    client = Client()
    response = client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    assert client.get("/admin/").status_code == 302  # not staff: sent to the admin's login
    assert not Client().login(username="ada", password="wrong")


def test_it_refuses_a_password_the_rules_refuse_and_two_that_differ(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", "short")
    with pytest.raises(CommandError, match="too short"):
        _create_user("--org", "Acme", "--username", "ada")
    monkeypatch.delenv("CONTEXTOPS_PASSWORD")
    answers = iter([PASSWORD, PASSWORD + "-typo"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    with pytest.raises(CommandError, match="differ"):
        _create_user("--org", "Acme", "--username", "ada")
    assert not get_user_model().objects.filter(username="ada").exists()


def test_it_asks_for_the_password_without_the_environment(db, monkeypatch):
    monkeypatch.delenv("CONTEXTOPS_PASSWORD", raising=False)
    monkeypatch.setattr("getpass.getpass", lambda prompt: PASSWORD)
    _create_user("--org", "Acme", "--username", "ada")
    assert Client().login(username="ada", password=PASSWORD)


def test_it_refuses_an_empty_password(db, monkeypatch):
    monkeypatch.delenv("CONTEXTOPS_PASSWORD", raising=False)
    monkeypatch.setattr("getpass.getpass", lambda prompt: "")
    with pytest.raises(CommandError, match="password is required"):
        _create_user("--org", "Acme", "--username", "ada")
    assert not get_user_model().objects.filter(username="ada").exists()


def test_it_lets_an_approver_decide_suspensions(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    assert "(approver)" in _create_user("--org", "Acme", "--username", "grace", "--approver")
    user = get_user_model().objects.get(username="grace")
    assert user.has_perm("frames.approve_suspension")
    assert not user.is_staff and user.member.organization.name == "Acme"


def test_it_gives_an_admin_the_django_admin_of_their_organization(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    _create_user("--org", "Acme", "--username", "root", "--admin")
    user = get_user_model().objects.get(username="root")
    assert user.is_staff and user.member.organization.name == "Acme"
    assert not user.is_superuser  # a superuser would see every organization
    assert user.has_perms(["facts.change_fact", "facts.edit_policy", "contextops.view_apikey"])
    assert not user.has_perm("frames.change_modelprice")  # the installation's, not theirs
    client = Client()
    assert client.login(username="root", password=PASSWORD)
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/contextops/agent/").status_code == 200


def test_running_it_again_grants_rights_but_never_takes_them_away(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    _create_user("--org", "Acme", "--username", "root", "--admin", "--approver")
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD + "-new")
    _create_user("--org", "Acme", "--username", "root")  # a new password, nothing else
    user = get_user_model().objects.get(username="root")
    assert user.is_staff and user.has_perm("facts.edit_policy")
    assert user.has_perm("frames.approve_suspension")
    assert Client().login(username="root", password=PASSWORD + "-new")


def test_it_never_moves_a_user_to_another_organization(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    _create_user("--org", "Acme", "--username", "ada")
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD + "-other")
    with pytest.raises(CommandError, match="belongs to Acme"):
        _create_user("--org", "Globex", "--username", "ada")
    user = get_user_model().objects.get(username="ada")
    assert user.member.organization.name == "Acme"
    assert Client().login(username="ada", password=PASSWORD)  # the password did not change


def test_it_issues_a_persons_own_key_that_may_decide_suspensions(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    _create_user("--org", "Acme", "--username", "grace", "--approver")
    out, err = _create_api_key("--org", "Acme", "--user", "grace")
    raw = out.splitlines()[-1]
    key = ApiKey.objects.get(prefix=raw.split("_")[1])
    assert key.user is not None and key.user.username == "grace"
    assert key.agent.name == "grace" and key.agent.organization.name == "Acme"
    assert "personal key of 'grace'" in err
    # The token is unknown: the key passed the permission check and the lookup answered.
    answer = ApiClient(key=raw).post("/suspensions/no-such-token/approve")
    assert answer.status_code == 404, answer.content
    # An agent's key, from the same command without --user, is not a person's.
    bot, _ = _create_api_key("--org", "Acme", "--agent", "bot")
    assert ApiKey.objects.get(prefix=bot.splitlines()[-1].split("_")[1]).user is None


def test_it_names_the_personal_keys_agent_when_asked(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    _create_user("--org", "Acme", "--username", "grace")
    out, _ = _create_api_key("--org", "Acme", "--agent", "grace-laptop", "--user", "grace")
    key = ApiKey.objects.get(prefix=out.splitlines()[-1].split("_")[1])
    assert key.agent.name == "grace-laptop" and key.user.username == "grace"


def test_it_issues_personal_keys_to_members_of_the_organization_only(db, monkeypatch):
    monkeypatch.setenv("CONTEXTOPS_PASSWORD", PASSWORD)
    _create_user("--org", "Globex", "--username", "eve", "--approver")
    get_user_model().objects.create_user("loner", password=PASSWORD)  # no organization
    for username in ("eve", "loner", "nobody"):
        with pytest.raises(CommandError, match=f"Acme has no member named '{username}'"):
            _create_api_key("--org", "Acme", "--user", username)
    assert not ApiKey.objects.filter(user__isnull=False).exists()
    assert not Organization.objects.filter(name="Acme").exists()


def test_it_needs_an_agent_or_a_user(db):
    with pytest.raises(CommandError, match="--agent"):
        _create_api_key("--org", "Acme")
    assert not ApiKey.objects.exists()
