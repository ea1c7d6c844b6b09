"""The client as an agent author installs it: a wheel built from clients/python, installed
into a fresh virtualenv that has no Django, running the README's snippet against a live
server."""

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from frames.models import Frame

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# One worker runs the module: the wheel and its virtualenv (``client_venv``) are then
# built once per run, not once on each worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("client-wheel")]


def _readme_agent_snippet() -> str:
    """The first Python block of the README's "How an agent connects" section."""
    section = README.read_text().split("## How an agent connects", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("client-wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(where / "dist")]
        + [str(ROOT / "clients" / "python")],
        check=True,
    )
    wheels = list((where / "dist").glob("contextops_client-*.whl"))
    assert len(wheels) == 1, wheels
    venv.create(where / "venv", with_pip=True)
    python = where / "venv" / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", str(wheels[0])], check=True)
    return python


def test_it_installs_without_django_and_ships_its_types(client_venv):
    probe = (
        "import importlib.util, pathlib, contextops_client as c;"
        "print(importlib.util.find_spec('django') is None,"
        " (pathlib.Path(c.__file__).parent / 'py.typed').exists())"
    )
    out = subprocess.run([client_venv, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_the_readme_snippet_runs_from_the_wheel_against_a_live_server(client_venv, agent):
    env = {**os.environ, "CONTEXTOPS_URL": agent.url, "CONTEXTOPS_API_KEY": agent.key}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    run = subprocess.run(
        [client_venv, "-c", _readme_agent_snippet()],
        capture_output=True,
        text=True,
        env=env,
        cwd=client_venv.parent.parent,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    frame = Frame.objects.get(session__agent=agent.agent, goal="Summarize the RFC")
    assert frame.status == Frame.Status.COMPLETED
    assert frame.handles.filter(kind="tool_result").count() == 1
    assert frame.session.lifecycle_state == "ended"
    assert frame.session.title == "Review the RFC"
