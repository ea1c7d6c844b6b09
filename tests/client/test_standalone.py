"""The client installs without the server: it imports the standard library, its required
dependencies (httpx; click for the command line), and each optional extra's package only in
the module of that extra's name (``mcp`` in ``mcp.py``), so a plain install imports."""

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python" / "contextops_client"
PYPROJECT = tomllib.loads((CLIENT.parent / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    """Import names of requirement strings: ``langchain-core`` → ``langchain_core``, and a
    namespace's first part (``langgraph-checkpoint>=2`` → ``langgraph``)."""
    names = {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0] for r in requirements}
    return {n.replace("-", "_") for n in names} | {n.split("-")[0] for n in names}


REQUIRED = _names(PYPROJECT["dependencies"])
EXTRAS = {extra: _names(reqs) for extra, reqs in PYPROJECT["optional-dependencies"].items()}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add((node.module or "").split(".")[0])
    return names


def test_it_needs_only_httpx_and_click_and_each_extra_stays_in_its_module():
    assert REQUIRED == {"httpx", "click"}
    for path in CLIENT.glob("*.py"):
        allowed = set(sys.stdlib_module_names) | REQUIRED | EXTRAS.get(path.stem, set())
        outside = _imports(path) - allowed
        assert not outside, f"{path.name} imports {sorted(outside)}"


def test_it_loads_and_works_with_django_and_celery_blocked():
    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {{"django", "celery", "kombu", "ninja", "contextops"}}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
sys.path.insert(0, {str(CLIENT.parent)!r})  # the client alone, without the server
from contextops_client import Client, AsyncClient, InsufficientTokens
from contextops_client.anthropic import wrap
ops = Client("http://127.0.0.1:9", "key", retries=0)
print(ops.absolute_url("/sessions/x/"))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "http://127.0.0.1:9/sessions/x/"


def test_it_exports_every_error_class_by_name():
    from contextops_client import errors

    classes = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.ContextopsError)
    }
    assert set(errors.__all__) == classes | {"error_from_response"}
