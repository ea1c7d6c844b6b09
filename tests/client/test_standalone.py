"""The client installs without the server: only httpx, anthropic and the standard library."""

import ast
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python" / "contextops_client"
ALLOWED = {"httpx", "anthropic", "click"} | set(sys.stdlib_module_names)
# An optional extra's SDK, only in the module that serves it (clients/python/pyproject.toml).
EXTRAS = {"mcp.py": {"mcp", "jsonschema", "uvicorn", "anyio"}}


def test_it_imports_only_httpx_anthropic_and_the_standard_library():
    for path in CLIENT.glob("*.py"):
        allowed = ALLOWED | EXTRAS.get(path.name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


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
