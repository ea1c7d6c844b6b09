"""Logins: throttled and locked out per user name and address (django-axes), and written
to the audit log with who, when and from where."""

import io

from django.core.management import call_command
from django.test import Client

from contextops.models import ApiKey, AuditEntry

PASSWORD = "pw-for-tests-1"


def _attempt(password: str, address: str = "203.0.113.7", username: str = "ada"):
    client = Client(REMOTE_ADDR=address)
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return client, response


def _logged_in(client: Client) -> bool:
    return client.get("/").status_code == 200


def test_twenty_wrong_passwords_lock_the_user_out_from_that_address(make_user, settings):
    make_user()
    answers = [_attempt("wrong-password")[1] for _ in range(20)]
    limit = settings.AXES_FAILURE_LIMIT
    assert limit <= 20
    # Below the limit the form says the password did not match; from the limit on, the
    # lockout page answers 429, explains itself and says who can help.
    assert all(a.status_code == 200 and "didn" in a.content.decode() for a in answers[: limit - 1])
    locked = answers[limit - 1 :]
    assert all(a.status_code == 429 for a in locked)
    page = locked[-1].content.decode()
    assert "Too many failed logins" in page and "axes_reset_username" in page
    # The right password does not get in either while locked out ...
    client, answer = _attempt(PASSWORD)
    assert answer.status_code == 429 and not _logged_in(client)
    # ... from this address: the same user elsewhere still logs in.
    elsewhere, answer = _attempt(PASSWORD, address="198.51.100.20")
    assert answer.status_code == 302 and _logged_in(elsewhere)
    failed = AuditEntry.objects.filter(action=AuditEntry.Action.LOGIN_FAILED)
    assert failed.count() >= limit and set(failed.values_list("address", flat=True)) == {
        "203.0.113.7"
    }
    lockouts = AuditEntry.objects.filter(action=AuditEntry.Action.LOCKED_OUT)
    assert set(lockouts.values_list("actor", "address")) == {("ada", "203.0.113.7")}


def test_a_lockout_is_lifted_by_an_administrator(make_user, settings):
    make_user()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _attempt("wrong-password")
    assert _attempt(PASSWORD)[1].status_code == 429
    call_command("axes_reset_username", "ada", stdout=io.StringIO())
    client, answer = _attempt(PASSWORD)
    assert answer.status_code == 302 and _logged_in(client)


def test_logins_and_logouts_are_audited_with_who_when_and_where(make_user):
    user = make_user()
    client, answer = _attempt(PASSWORD, address="192.0.2.44")
    assert answer.status_code == 302
    client.post("/accounts/logout/")
    entries = list(AuditEntry.objects.order_by("created_at", "pk"))
    assert [(e.action, e.actor, e.address) for e in entries] == [
        ("login", "ada", "192.0.2.44"),
        ("logout", "ada", "192.0.2.44"),
    ]
    assert entries[0].user == user and entries[0].organization == user.member.organization
    assert entries[0].via == "POST /accounts/login/" and entries[0].created_at is not None


def test_issuing_and_revoking_keys_is_audited(make_user, api):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_key", "--org", "Acme", "--agent", "ci", stdout=out, stderr=err)
    key = ApiKey.objects.get(agent__name="ci")
    issued = AuditEntry.objects.get(action="api_key.issued", target=f"api key {key.prefix}")
    assert issued.actor == "manage.py create_api_key" and issued.detail["agent"] == "ci"
    admin = Client(REMOTE_ADDR="192.0.2.9")
    admin.force_login(make_user(username="root", admin=True))
    admin.post("/admin/contextops/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    revoked = AuditEntry.objects.get(action="api_key.revoked")
    assert (revoked.actor, revoked.target, revoked.address) == (
        "root",
        f"api key {key.prefix}",
        "192.0.2.9",
    )
    admin.post(
        "/admin/contextops/agent/", {"action": "issue_key", "_selected_action": [key.agent.pk]}
    )
    assert AuditEntry.objects.filter(action="api_key.issued", actor="root").count() == 1


def _via_proxy(password: str, client_address: str, forged: str = ""):
    """A login through a TLS proxy at 10.0.0.2 that appends its peer to X-Forwarded-For
    (nginx's ``$proxy_add_x_forwarded_for``), ``forged`` being what the client sent."""
    forwarded = f"{forged}, {client_address}" if forged else client_address
    client = Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    response = client.post("/accounts/login/", {"username": "ada", "password": password})
    return client, response


def test_behind_a_tls_proxy_the_audit_names_the_client_the_proxy_saw(make_user, settings):
    settings.TRUSTED_PROXIES = ("10.0.0.2",)
    make_user()
    _via_proxy(PASSWORD, "198.51.100.77", forged="203.0.113.250")
    entry = AuditEntry.objects.get(action=AuditEntry.Action.LOGIN)
    assert entry.address == "198.51.100.77"
    # A load balancer in front of that proxy, which appended its own peer: a network.
    settings.TRUSTED_PROXIES = ("10.0.0.0/24",)
    _via_proxy(PASSWORD, "198.51.100.78, 10.0.0.9", forged="203.0.113.250")
    assert AuditEntry.objects.filter(action=AuditEntry.Action.LOGIN).latest("id").address == (
        "198.51.100.78"
    )


def test_x_forwarded_for_from_a_peer_that_is_not_a_trusted_proxy_is_ignored(make_user, settings):
    """Straight to the server, a new forged address each try: still one address, locked
    out, and the audit log records the socket's peer."""
    settings.TRUSTED_PROXIES = ("10.0.0.2",)
    make_user()
    for n in range(settings.AXES_FAILURE_LIMIT + 5):
        Client(REMOTE_ADDR="198.51.100.90", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").post(
            "/accounts/login/", {"username": "ada", "password": "wrong-password"}
        )
    client = Client(REMOTE_ADDR="198.51.100.90", HTTP_X_FORWARDED_FOR="203.0.113.222")
    answer = client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert answer.status_code == 429 and not _logged_in(client)
    addresses = set(AuditEntry.objects.values_list("address", flat=True))
    assert addresses == {"198.51.100.90"}
    # With no trusted proxy at all (the default) the header is never read either.
    settings.TRUSTED_PROXIES = ()
    client = Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="198.51.100.20")
    client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert AuditEntry.objects.latest("id").address == "10.0.0.2"


def test_behind_a_tls_proxy_a_forged_address_neither_escapes_nor_spreads_a_lockout(
    make_user, settings
):
    settings.TRUSTED_PROXIES = ("10.0.0.2",)
    make_user()
    for n in range(settings.AXES_FAILURE_LIMIT + 5):  # a new forged address each time
        _via_proxy("wrong-password", "198.51.100.66", forged=f"203.0.113.{n}")
    client, answer = _via_proxy(PASSWORD, "198.51.100.66", forged="203.0.113.200")
    assert answer.status_code == 429 and not _logged_in(client)
    # Ada from her own address is not locked out by what that client did, whatever the
    # addresses it forged.
    client, answer = _via_proxy(PASSWORD, "198.51.100.20", forged="198.51.100.66")
    assert answer.status_code == 302 and _logged_in(client)
    locked = AuditEntry.objects.filter(action=AuditEntry.Action.LOCKED_OUT)
    assert set(locked.values_list("address", flat=True)) == {"198.51.100.66"}
