"""Managing destinations: the API for an admin's own key, the settings page (the secret
shown once, the test button), and nobody else."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from contextops.notifications.models import Delivery, Destination
from contextops.tenancy import api_key_create, user_create
from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_api(make_user):
    make_user(username="root", admin=True)
    key, raw = api_key_create(org_name="Acme", agent_name="root-terminal", username="root")
    return ApiClient(key=raw, organization=key.agent.organization, agent=key.agent)


@pytest.fixture
def admin_client(make_user):
    client = Client()
    client.force_login(make_user(username="root", admin=True))
    return client


def test_an_admin_adds_a_webhook_and_sees_its_secret_once(admin_api):
    response = admin_api.post(
        "/notifications/destinations",
        {"name": "ops", "kind": "webhook", "url": "https://hooks.example/x"},
    )
    assert response.status_code == 201, response.content
    made = response.json()
    assert made["secret"].startswith("whsec_")
    assert made["events"] == [
        "approval.pending",
        "approval.decided",
        "approval.expiring",
        "approval.expired",
    ]
    listed = admin_api.get("/notifications/destinations").json()
    assert listed[0]["secret"] is None
    assert listed[0]["secret_hint"] == "…" + made["secret"][-4:]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "x", "kind": "webhook", "url": "ftp://nope"}, "url"),
        ({"name": "x", "kind": "slack"}, "url"),
        ({"name": "x", "kind": "email", "url": "https://a.example"}, "url"),
        ({"name": "x", "kind": "pager", "url": "https://a.example"}, "kind"),
        ({"name": "x", "kind": "slack", "url": "https://a.example", "events": ["nope"]}, "events"),
        ({"name": "x", "kind": "slack", "url": "https://a.example", "events": []}, "events"),
        ({"name": " ", "kind": "slack", "url": "https://a.example"}, "name"),
    ],
)
def test_a_bad_destination_is_422_naming_the_field_and_nothing_is_made(admin_api, body, field):
    response = admin_api.post("/notifications/destinations", body)
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"
    assert field in str(response.json()["errors"])
    assert not Destination.objects.exists()


def test_unknown_fields_and_taken_names_are_refused(admin_api):
    body = {"name": "ops", "kind": "email"}
    assert admin_api.post("/notifications/destinations", {**body, "colour": 1}).status_code == 422
    assert admin_api.post("/notifications/destinations", body).status_code == 201
    taken = admin_api.post("/notifications/destinations", body)
    assert taken.status_code == 409 and taken.json()["error"] == "name_taken"


def test_agents_below_admin_and_members_may_read_but_not_manage_destinations(
    api, make_api, make_user, admin_api
):
    made = admin_api.post(
        "/notifications/destinations",
        {"name": "s", "kind": "slack", "url": "https://hooks.example/T000/B000/secret-part"},
    ).json()
    assert made["url"] == "https://hooks.example/T000/B000/secret-part"  # to its maker
    make_user(username="ada")
    key, raw = api_key_create(org_name="Acme", agent_name="ada-terminal", username="ada")
    member = ApiClient(key=raw)
    # an employee agent lacks the authority; a member's own key lacks the right
    for reader, refusal in ((api, "authority_too_low"), (member, "permission_denied")):
        listed = reader.get("/notifications/destinations")
        assert listed.status_code == 200
        assert listed.json()[0]["url"] == "https://hooks.example/…"  # the path is the secret
        refused = reader.post("/notifications/destinations", {"name": "x", "kind": "email"})
        assert refused.status_code == 403 and refused.json()["error"] == refusal
        assert reader.delete(f"/notifications/destinations/{made['id']}").status_code == 403
    assert Destination.objects.count() == 1
    # an agent key of admin authority manages them
    boss = make_api(agent="ops-bot", authority="admin")
    added = boss.post("/notifications/destinations", {"name": "e", "kind": "email"})
    assert added.status_code == 201


def test_another_organizations_destination_is_404(admin_api, make_api):
    outsider = admin_api.post("/notifications/destinations", {"name": "o", "kind": "email"}).json()
    user_create(org_name="Globex", username="boss", password="pw-for-tests-1", admin=True)
    key, raw = api_key_create(org_name="Globex", agent_name="boss-terminal", username="boss")
    globex = ApiClient(key=raw)
    assert globex.delete(f"/notifications/destinations/{outsider['id']}").status_code == 404
    assert globex.post(f"/notifications/destinations/{outsider['id']}/test").status_code == 404
    assert Destination.objects.count() == 1
    assert get_user_model().objects.filter(username="boss").exists()


def test_the_test_operation_queues_a_delivery_listed_with_its_status(admin_api):
    made = admin_api.post(
        "/notifications/destinations", {"name": "s", "kind": "slack", "url": "https://a.example/x"}
    ).json()
    queued = admin_api.post(f"/notifications/destinations/{made['id']}/test")
    assert queued.status_code == 202
    assert queued.json()["event"] == "test" and queued.json()["status"] == "pending"
    listed = admin_api.get("/notifications/deliveries", {"destination_id": made["id"]}).json()
    assert [d["id"] for d in listed] == [queued.json()["id"]]
    assert admin_api.delete(f"/notifications/destinations/{made['id']}").status_code == 204
    assert not Delivery.objects.exists()


def test_the_settings_page_adds_a_webhook_shows_the_secret_once_and_tests_it(admin_client):
    page = admin_client.post(
        "/notifications/",
        {
            "name": "ops hook",
            "kind": "webhook",
            "url": "https://hooks.example/x",
            "events": ["approval.pending", "compaction.failed"],
        },
    )
    assert page.status_code == 200
    destination = Destination.objects.get()
    assert destination.events == ["approval.pending", "compaction.failed"]
    assert destination.secret in page.content.decode()
    again = admin_client.get("/notifications/").content.decode()
    assert destination.secret not in again and destination.secret_hint in again
    tested = admin_client.post(f"/notifications/{destination.pk}/test/")
    assert tested.status_code == 302 and tested["Location"] == "/notifications/deliveries/"
    assert Delivery.objects.get().event == "test"


def test_the_settings_page_says_what_is_wrong(admin_client):
    page = admin_client.post("/notifications/", {"name": "x", "kind": "webhook", "url": "nope"})
    assert page.status_code == 422
    assert "http:// or https://" in page.content.decode()
    assert not Destination.objects.exists()


@pytest.mark.parametrize("path", ["/notifications/", "/notifications/deliveries/"])
def test_only_admins_open_the_notification_pages(member_client, path):
    assert member_client.get(path).status_code == 403


def test_another_organizations_admin_cannot_test_or_remove_a_destination(admin_client, make_user):
    admin_client.post(
        "/notifications/", {"name": "ops", "kind": "email", "events": ["approval.pending"]}
    )
    destination = Destination.objects.get()
    outsider = Client()
    outsider.force_login(make_user(username="eve", org="Globex", admin=True))
    for action in ("test", "remove"):
        assert outsider.post(f"/notifications/{destination.pk}/{action}/").status_code == 404
    assert "acme-pager" not in outsider.get("/notifications/").content.decode()
    assert Destination.objects.count() == 1 and not Delivery.objects.exists()
    anonymous = Client().get("/notifications/deliveries/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
