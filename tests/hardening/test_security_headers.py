"""The security headers of a dashboard page, as a production install sends them.

Production settings are built the way ``tests/contextops/test_settings.py`` builds them:
``contextops.settings`` (not the test settings) in a process of its own, from the
environment a deployment sets. That process migrates a database of its own, collects
the static files, logs a member in and fetches the sessions page over HTTPS, the same
page over plain HTTP, and every script the page loads; it prints what it got as JSON.
"""

import json
import os
import re
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

# One worker runs the module: its production page (a migration and a collectstatic in a
# process of its own) is then fetched once per run, not once on each worker.
pytestmark = pytest.mark.xdist_group("production-page")

HOST = "ops.example.com"
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'"
)

FETCH = r"""
import json, re
from django.core.management import call_command
from django.test import Client
from contextops.tenancy import user_create

call_command("migrate", verbosity=0)
call_command("collectstatic", verbosity=0, interactive=False)
client = Client(HTTP_HOST="%(host)s")
login = client.get("/accounts/login/", secure=True)
client.force_login(user_create(org_name="Acme", username="ada", password="pw-for-tests-1"))
person = Client(HTTP_HOST="%(host)s")
logged_in = person.post(
    "/accounts/login/", {"username": "ada", "password": "pw-for-tests-1"}, secure=True
)
page = client.get("/", secure=True)
plain = client.get("/")
html = page.content.decode()
scripts = re.findall(r"<script\b[^>]*>", html)
served = {}
for src in re.findall(r"<script\b[^>]*\bsrc=\"([^\"]+)\"", html):
    response = client.get(src, secure=True)
    served[src] = {
        "status": response.status_code,
        "type": response.get("Content-Type", ""),
        "nosniff": response.get("X-Content-Type-Options", ""),
    }
print(json.dumps({
    "status": page.status_code,
    "headers": dict(page.headers),
    "plain": {"status": plain.status_code, "location": plain.get("Location", "")},
    "csrf_cookie": {k: v for k, v in login.cookies["csrftoken"].items() if v},
    "login_page_headers": dict(login.headers),
    "login_status": logged_in.status_code,
    "session_cookie": {k: v for k, v in logged_in.cookies["sessionid"].items() if v},
    "scripts": scripts,
    "served": served,
    "inline_handlers": re.findall(r"\son[a-z]+=", html),
}))
"""


@pytest.fixture(scope="module")
def production_page(tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("production")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE",)},
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": HOST,
        "CONTEXTOPS_VAR_DIR": str(var_dir),
        "STATIC_ROOT": str(var_dir / "static"),
        "CELERY_BROKER_URL": "memory://",
    }
    for name in ("DATABASE_URL", "REDIS_URL", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"):
        env.pop(name, None)  # the defaults a production install starts from
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", FETCH % {"host": HOST}],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_dashboard_page_carries_the_production_security_headers(production_page):
    headers = production_page["headers"]
    assert production_page["status"] == 200
    assert headers["Content-Security-Policy"] == POLICY
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["X-Frame-Options"] == "DENY"


def test_the_policy_allows_no_inline_or_foreign_script(production_page):
    directives = dict(
        (part.split()[0], part.split()[1:])
        for part in production_page["headers"]["Content-Security-Policy"].split(";")
    )
    assert directives["script-src"] == ["'self'"]
    assert directives["default-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert production_page["inline_handlers"] == []  # onclick= and the like would be blocked


def test_htmx_and_every_other_script_are_served_from_static(production_page):
    scripts = production_page["scripts"]
    assert scripts, "the page loads no script at all"
    for tag in scripts:
        src = re.search(r'\bsrc="([^"]+)"', tag)
        assert src, f"an inline script, which the policy blocks: {tag}"
        assert src.group(1).startswith("/static/"), tag
    htmx = [
        src
        for src in production_page["served"]
        if re.search(r"/htmx[-\d]*(\.min)?(\.[0-9a-f]{12})?\.js$", src)
    ]
    assert htmx, scripts  # the library itself, from the project, no CDN
    for src, answer in production_page["served"].items():
        assert answer["status"] == 200, (src, answer)
        assert "javascript" in answer["type"], (src, answer)
        assert answer["nosniff"] == "nosniff", (src, answer)


def test_plain_http_is_redirected_and_cookies_are_secure(production_page):
    assert production_page["plain"] == {"status": 301, "location": f"https://{HOST}/"}
    assert production_page["csrf_cookie"].get("secure") is True


def test_a_real_login_sets_a_secure_http_only_session_cookie(production_page):
    assert production_page["login_status"] == 302  # through the login form, not force_login
    cookie = production_page["session_cookie"]
    assert cookie.get("secure") is True and cookie.get("httponly") is True
    assert cookie.get("samesite") == "Lax"
    assert cookie.get("max-age") == 12 * 3600  # SESSION_COOKIE_AGE: a working day at most


def test_the_login_page_carries_the_security_headers_too(production_page):
    headers = production_page["login_page_headers"]
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["Content-Security-Policy"] == POLICY
    assert "max-age=31536000" in headers["Strict-Transport-Security"]
