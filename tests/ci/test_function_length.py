"""No function in a services or selectors module runs past 80 lines unless its docstring
says why, in a sentence starting "Long because" (docs/architecture.md, "Long functions").

A long write or read is split into named steps where that reads better; where it reads
better whole, the reason is written where the next reader looks first.
"""

import ast
from pathlib import Path

from django.conf import settings

MAX_LINES = 80
MARKER = "Long because"
PACKAGES = ("contextops", "frames", "facts")


def _in_scope(path: Path) -> bool:
    """A services or selectors module (``services.py``, ``selectors.py``, a module of a
    ``services`` or ``selectors`` package) or a module of the transcript importing package."""
    parts = path.parts
    return (
        path.stem in ("services", "selectors")
        or "services" in parts[:-1]
        or "selectors" in parts[:-1]
        or parts[:3] == ("frames", "conversation", "importing")
    )


def _modules(root: Path) -> list[Path]:
    return sorted(
        path.relative_to(root)
        for package in PACKAGES
        for path in (root / package).rglob("*.py")
        if "migrations" not in path.parts and _in_scope(path.relative_to(root))
    )


def _long_without_reason(root: Path, path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse((root / path).read_text(), filename=str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        docstring = " ".join((ast.get_docstring(node) or "").split())
        if length > MAX_LINES and MARKER not in docstring:
            found.append(f"{path}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_it_finds_the_services_and_selectors_modules():
    modules = {str(path) for path in _modules(Path(settings.BASE_DIR))}
    assert {
        "frames/services/usage.py",
        "frames/suspensions/services.py",
        "facts/services.py",
        "facts/selectors/ranking.py",
        "frames/selectors.py",
        "frames/conversation/importing/executing.py",
    } <= modules
    assert "frames/api.py" not in modules


def test_no_function_in_services_and_selectors_is_long_without_saying_why():
    root = Path(settings.BASE_DIR)
    found = [where for path in _modules(root) for where in _long_without_reason(root, path)]
    assert found == [], (
        f'Split these into named steps, or say in the docstring why one reads better whole, in a sentence starting "{MARKER}": '
        + ", ".join(found)
    )


def test_it_fails_on_a_long_function_and_passes_one_that_says_why(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "services.py").write_text(
        f'def long_one():\n    """Does a lot."""\n{body}\n\n\n'
        f'def explained():\n    """Does a lot.\n\n    Long because it is one\n    pass."""\n{body}\n\n\n'
        f'def short():\n    """Does little."""\n    return 1\n'
    )
    found = _long_without_reason(tmp_path, Path("services.py"))
    assert found == [f"services.py:1 long_one ({MAX_LINES + 2} lines)"]
