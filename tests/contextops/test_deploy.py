"""The deployment files in deploy/ against the code they start: the example environment
names every variable the settings and the web server read (and nothing else), the
systemd units and the compose file start the processes docs/operating.md lists, and the
image installs the locked runtime dependencies, collects the static files, runs as a
user of its own and checks the readiness probe. Docker is not needed: the files are read.
"""

import ast
import re
import shlex
from pathlib import Path

import pytest
import yaml
from django.urls import resolve

from contextops import health

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# Where the processes read their environment: the settings, and gunicorn's own settings.
READERS = [ROOT / "contextops" / "settings.py", ROOT / "contextops" / "gunicorn_conf.py"]
ENV_HELPERS = {"env_bool", "env_int"}  # settings.py's readers: (name, default)


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _constant_name(node: ast.AST, where: str) -> str:
    assert isinstance(node, ast.Constant) and isinstance(node.value, str), (
        f"{where}: the environment is read with a name this test cannot see "
        f"({ast.unparse(node)}); name the variable literally"
    )
    return node.value


def environment_read(path: Path) -> set[str]:
    """Every variable ``path`` reads: ``os.environ.get("X")``, ``os.environ["X"]``,
    ``env_bool("X", ...)``, ``env_int("X", ...)``. Any other use of ``os.environ`` fails,
    so a new way of reading it cannot slip past this test."""
    tree = ast.parse(path.read_text())
    helpers = {
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in ENV_HELPERS
    }
    inside_helpers = {id(n) for helper in helpers for n in ast.walk(helper)}
    names, understood = set(), set()
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if id(node) in inside_helpers:
            understood.update(id(n) for n in ast.walk(node) if _is_os_environ(n))
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ENV_HELPERS:
                names.add(_constant_name(node.args[0], where))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and _is_os_environ(node.func.value)
        ):
            names.add(_constant_name(node.args[0], where))
            understood.add(id(node.func.value))
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
            names.add(_constant_name(node.slice, where))
            understood.add(id(node.value))
    unknown = [
        f"{path.name}:{n.lineno}"
        for n in ast.walk(tree)
        if _is_os_environ(n) and id(n) not in understood
    ]
    assert not unknown, f"os.environ used in a way this test does not read: {unknown}"
    return names


def example_names() -> set[str]:
    """Names of the example file, set (NAME=value) or shown with their default (# NAME=)."""
    text = (DEPLOY / "contextops.env.example").read_text()
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


def test_the_example_environment_names_every_variable_the_processes_read():
    read = set().union(*(environment_read(path) for path in READERS))
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "WEB_WORKERS"} <= read  # sanity
    named = example_names()
    assert not read - named, f"deploy/contextops.env.example misses {sorted(read - named)}"
    assert not named - read, f"deploy/contextops.env.example names unread {sorted(named - read)}"


def test_the_example_sets_what_production_requires():
    text = (DEPLOY / "contextops.env.example").read_text()
    required = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS"} <= required


@pytest.mark.parametrize(
    ("source", "refusal"),
    [
        ('NAME = "X"\nX = os.environ.get(NAME)\n', "name the variable literally"),
        ("ALL = dict(os.environ)\n", "does not read"),
    ],
)
def test_reading_the_environment_another_way_is_noticed(tmp_path, source, refusal):
    sneaky = tmp_path / "settings.py"
    sneaky.write_text("import os\n" + source)
    with pytest.raises(AssertionError, match=refusal):
        environment_read(sneaky)


def _unit(name: str) -> dict[str, str]:
    lines = (DEPLOY / "systemd" / name).read_text().splitlines()
    return dict(
        line.split("=", 1) for line in lines if "=" in line and not line.startswith(("#", ";"))
    )


def _exec(unit: dict[str, str]) -> list[str]:
    argv = shlex.split(unit["ExecStart"])
    assert argv[0].startswith("/srv/contextops/venv/bin/"), argv
    return [Path(argv[0]).name, *argv[1:]]


def test_the_systemd_units_start_web_worker_and_beat_as_operating_md_does():
    web = _unit("contextops-web.service")
    worker = _unit("contextops-worker.service")
    beat = _unit("contextops-beat.service")
    assert _exec(web) == [
        "gunicorn",
        "-c",
        "python:contextops.gunicorn_conf",
        "contextops.wsgi:application",
    ]
    assert _exec(worker)[:4] == ["celery", "-A", "contextops", "worker"]
    assert _exec(beat)[:4] == ["celery", "-A", "contextops", "beat"]
    assert "/var/lib/contextops/celerybeat-schedule" in _exec(beat)  # out of the checkout
    for unit in (web, worker, beat):
        assert unit["EnvironmentFile"] == "/etc/contextops/contextops.env"
        assert unit["User"] == "contextops"
        assert unit["WorkingDirectory"] == "/srv/contextops/app"
    assert (ROOT / "contextops" / "gunicorn_conf.py").is_file()


def _dockerfile() -> list[str]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def test_the_image_installs_the_lock_collects_static_files_and_runs_unprivileged():
    lines = _dockerfile()
    assert lines[0] == "FROM python:3.11-slim"
    runs = " ".join(line for line in lines if line.startswith("RUN "))
    assert "pip install --require-hashes -r /tmp/prod.txt" in runs
    assert "COPY requirements/prod.txt /tmp/prod.txt" in lines
    assert "manage.py collectstatic --noinput" in runs
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), users
    for line in lines:
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), line


def test_the_image_checks_the_readiness_probe():
    (healthcheck,) = [line for line in _dockerfile() if line.startswith("HEALTHCHECK")]
    path = re.search(r"http://127\.0\.0\.1:8000(/\w+)", healthcheck).group(1)
    assert resolve(path).func is health.readyz


def test_compose_runs_postgres_redis_web_worker_and_one_beat_from_the_image():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("migrate", "web", "worker", "beat"):
        build = services[name]["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == (
            DEPLOY / "Dockerfile"
        ).resolve()
    assert services["worker"]["command"][:4] == ["celery", "-A", "contextops", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "contextops", "beat"]
    assert "replicas" not in services["beat"].get("deploy", {})
    assert services["web"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )
    read = set().union(*(environment_read(path) for path in READERS))
    for name in ("web", "worker", "beat"):
        given = set(services[name]["environment"])
        assert given <= read, f"{name} sets variables nothing reads: {sorted(given - read)}"


def _compose_default(value: str) -> str:
    """``value`` as compose reads it with nothing set: each ``${NAME:-default}`` its default."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)


def test_compose_publishes_only_on_this_host_and_trusts_only_its_gateway():
    """Published on every interface, the web port let anyone send their own
    X-Forwarded-For past the proxy; by default it listens on 127.0.0.1, for a proxy on
    this host, and believes the header only from the network's gateway."""
    import ipaddress

    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    published = [
        _compose_default(str(port))
        for service in compose["services"].values()
        for port in service.get("ports", [])
    ]
    assert published == ["127.0.0.1:8000:8000"]
    [network] = compose["networks"]["default"]["ipam"]["config"]
    trusted = _compose_default(compose["x-contextops"]["environment"]["CONTEXTOPS_TRUSTED_PROXIES"])
    assert trusted == network["gateway"]
    assert ipaddress.ip_address(trusted) in ipaddress.ip_network(network["subnet"])
