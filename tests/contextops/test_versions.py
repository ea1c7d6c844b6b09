"""The versions a release names: the server's and the client's, each said once in its
pyproject.toml and once in code, and the two agree."""

import tomllib
from pathlib import Path

import contextops_client
from contextops_client._http import USER_AGENT

import contextops

ROOT = Path(__file__).resolve().parents[2]


def _version(pyproject: Path) -> str:
    return tomllib.loads(pyproject.read_text())["project"]["version"]


def test_it_says_the_servers_version_where_pyproject_does():
    assert contextops.__version__ == _version(ROOT / "pyproject.toml") == "0.2.0"


def test_it_says_the_clients_version_where_its_pyproject_does():
    assert contextops_client.__version__ == _version(ROOT / "clients/python/pyproject.toml")
    assert contextops_client.__version__ == "0.3.0"
    assert USER_AGENT == "contextops-client/0.3.0"


def test_it_shows_the_servers_version_to_a_member(member_client):
    page = member_client.get("/").content.decode()
    assert "contextops 0.2.0</footer>" in page
