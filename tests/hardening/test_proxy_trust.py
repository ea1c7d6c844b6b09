"""Forged proxy headers sent straight to a production gunicorn change nothing.

The server runs as deploy/docker-compose.yml runs it (``BEHIND_TLS_PROXY=1``) with its
proxy named in ``CONTEXTOPS_TRUSTED_PROXIES``; the test is not that proxy. Fifteen wrong
passwords, each claiming a new address in ``X-Forwarded-For`` (and ``X-Real-IP``,
``Forwarded``), lock the user out from the test's own address: the right password then
answers 429, and the audit log records the socket's address, never a forged one.
"""

import re
import sqlite3

import httpx
import pytest

from tests.hardening.production import ProductionServer

pytestmark = pytest.mark.xdist_group("live")

PASSWORD = "pw-for-tests-1"


@pytest.fixture
def server(production_web):
    return production_web


def _login(web: ProductionServer, password: str, forged: str) -> httpx.Response:
    with httpx.Client(base_url=web.url, timeout=30) as client:
        page = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text[:500]
        return client.post(
            "/accounts/login/",
            data={"username": "ada", "password": password, "csrfmiddlewaretoken": token[1]},
            headers={
                "X-Forwarded-For": forged,
                "X-Real-IP": forged,
                "Forwarded": f"for={forged}",
                "X-Forwarded-Proto": "https",
                "Referer": f"https://127.0.0.1:{web.port}/accounts/login/",
            },
        )


def test_forged_forwarded_addresses_straight_to_gunicorn_are_locked_out(server):
    answers = [
        _login(server, "wrong-password", forged=f"203.0.113.{n}").status_code for n in range(15)
    ]
    assert answers[:9] == [200] * 9, answers  # the form again: "didn't match"
    assert set(answers[9:]) == {429}, answers  # locked out at the 10th (the default limit)
    right = _login(server, PASSWORD, forged="198.51.100.1")
    assert right.status_code == 429 and "Too many failed logins" in right.text
    with sqlite3.connect(server.env["CONTEXTOPS_VAR_DIR"] + "/contextops.sqlite3") as db:
        rows = db.execute("SELECT address FROM contextops_auditentry WHERE action LIKE 'login%'")
        addresses = {row[0] for row in rows}
    assert addresses == {"127.0.0.1"}
