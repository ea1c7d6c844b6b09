"""Static files as production collects and serves them: content-hashed names, compressed
copies, pages that link the hashed names, and whitenoise answering those with a far-future
Cache-Control. With DEBUG (``make run``) nothing is collected and names stay as they are.

Each scenario runs ``contextops.settings`` (not the test settings, which keep the plain
storage) in a process of its own, from the environment a deployment sets.
"""

import importlib.util
import json
import os
import re
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

# One worker runs the module: its collectstatic (``production``) is then made once per
# run, not once on each worker.
pytestmark = pytest.mark.xdist_group("static-production")

HOST = "ops.example.com"
HASHED = r"[0-9a-f]{12}"

FETCH = r"""
import json, re
from django.conf import settings
from django.core.management import call_command
from django.test import Client

from contextops.health import readiness

before = readiness().static  # as /readyz would say it, before anything is collected
if %(collect)s:
    call_command("collectstatic", verbosity=0, interactive=False)
client = Client(HTTP_HOST="%(host)s")
ready = client.get("/readyz", secure=True)
page = client.get("/accounts/login/", secure=True)
html = page.content.decode()
links = re.findall(r'(?:href|src)="(/static/[^"]+)"', html)
served = {}
for link in links:
    plain = client.get(link, secure=True)
    gzipped = client.get(link, secure=True, HTTP_ACCEPT_ENCODING="gzip")
    served[link] = {
        "status": plain.status_code,
        "cache_control": plain.get("Cache-Control", ""),
        "gzip_encoding": gzipped.get("Content-Encoding", ""),
    }
icon = client.get("/favicon.ico", secure=True)
print(json.dumps({
    "storage": settings.STORAGES["staticfiles"]["BACKEND"],
    "status": page.status_code,
    "links": links,
    "served": served,
    "favicon": {"status": icon.status_code, "location": icon.get("Location", "")},
    "static_before": before,
    "static": ready.json()["static"],
}))
"""


def _run(tmp_path, *, debug: bool, collect: bool) -> dict:
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DJANGO_SETTINGS_MODULE": "contextops.settings",
        "DEBUG": "1" if debug else "0",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "ALLOWED_HOSTS": HOST,
        "CONTEXTOPS_VAR_DIR": str(tmp_path / "var"),
        "STATIC_ROOT": str(tmp_path / "static"),
        "CELERY_BROKER_URL": "memory://",
    }
    for name in ("DATABASE_URL", "REDIS_URL"):
        env.pop(name, None)  # the login page needs neither
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", FETCH % {"host": HOST, "collect": collect}],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    where = tmp_path_factory.mktemp("static-production")
    return where / "static", _run(where, debug=False, collect=True)


def test_collectstatic_writes_hashed_names_with_compressed_copies(production):
    root, answer = production
    assert answer["storage"] == "whitenoise.storage.CompressedManifestStaticFilesStorage"
    manifest = json.loads((root / "staticfiles.json").read_text())["paths"]
    for name in ("css/app.css", "js/app.js", "favicon.svg", "django_htmx/htmx-2.min.js"):
        hashed = manifest[name]
        stem, _, suffix = name.rpartition(".")
        assert re.fullmatch(rf"{re.escape(stem)}\.{HASHED}\.{suffix}", hashed), (name, hashed)
        assert (root / hashed).is_file()
        assert (root / f"{hashed}.gz").is_file(), hashed
        # Brotli copies come only with the brotli package; whitenoise uses it when found.
        brotli = importlib.util.find_spec("brotli") is not None
        assert (root / f"{hashed}.br").is_file() is brotli, hashed


def test_a_page_links_the_hashed_names_served_with_a_far_future_cache(production):
    _, answer = production
    assert answer["status"] == 200
    links = answer["links"]
    assert any(re.fullmatch(rf"/static/css/app\.{HASHED}\.css", link) for link in links), links
    assert any(re.fullmatch(rf"/static/js/app\.{HASHED}\.js", link) for link in links), links
    for link in links:
        assert re.search(rf"\.{HASHED}\.\w+$", link), f"an unhashed link: {link}"
        served = answer["served"][link]
        assert served["status"] == 200, (link, served)
        assert served["cache_control"] == "max-age=315360000, public, immutable", (link, served)
        assert served["gzip_encoding"] == "gzip", (link, served)


def test_the_favicon_redirect_is_temporary_and_names_the_hashed_icon(production):
    _, answer = production
    icon = answer["favicon"]
    assert icon["status"] == 302  # the hashed name changes with the icon; never cached for good
    assert re.fullmatch(rf"/static/favicon\.{HASHED}\.svg", icon["location"]), icon


def test_debug_serves_the_source_files_without_collectstatic(tmp_path):
    answer = _run(tmp_path, debug=True, collect=False)
    assert answer["storage"] == "django.contrib.staticfiles.storage.StaticFilesStorage"
    assert answer["status"] == 200
    assert "/static/css/app.css" in answer["links"]
    assert answer["served"]["/static/css/app.css"]["status"] == 200
    assert not (tmp_path / "static" / "staticfiles.json").exists()


def test_a_web_process_is_not_ready_until_the_static_files_are_collected(production):
    """Outside DEBUG pages link the manifest's hashed names: before ``collectstatic`` they
    cannot render, so the readiness check says so and an orchestrator sends no traffic."""
    _, answer = production
    assert answer["static_before"].startswith("unavailable"), answer["static_before"]
    assert "collectstatic" in answer["static_before"]
    assert answer["static"] == "ok"


def test_debug_is_ready_without_collectstatic(tmp_path):
    answer = _run(tmp_path, debug=True, collect=False)
    assert (answer["static_before"], answer["static"]) == ("ok", "ok")
