"""The product's own imports, read as a graph: no cycle, and the dependency graph in plain
sight (module-level imports), with a handful of commented exceptions.

Read from the source with ``ast``, so the test sees what a reader sees, whatever Python
happens to have imported already. ``make lint`` checks the floors (import-linter).
"""

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "contextops": ROOT / "contextops",
    "frames": ROOT / "frames",
    "facts": ROOT / "facts",
    "contextops_client": ROOT / "clients" / "python" / "contextops_client",
}
# The ninth: contextops.embeddings loads wordllama (most of a second to import) on first use.
# The tenth and eleventh: contextops.llm loads anthropic (about 2 s) where it summarizes.
MAX_IMPORTS_INSIDE_FUNCTIONS = 11


@dataclass(frozen=True)
class LocalImport:
    module: str
    line: int
    commented: bool


def _modules() -> dict[str, Path]:
    modules = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom, known: set) -> set:
    """The product modules ``node`` imports (a name imported from a package counts as its
    submodule when there is one)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        names = [
            f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
            for alias in node.names
        ]
    found = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _read() -> tuple[dict[str, set[str]], list[LocalImport]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    local: list[LocalImport] = []
    for module, path in modules.items():
        source = path.read_text()
        lines = source.splitlines()

        def visit(node: ast.AST, in_function: bool, module=module, path=path, lines=lines):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Import | ast.ImportFrom):
                    targets = _targets(module, path, child, known) - {module}
                    if in_function:
                        above = lines[child.lineno - 2].strip() if child.lineno > 1 else ""
                        here = lines[child.lineno - 1]
                        commented = above.startswith("#") or "#" in here
                        local.append(LocalImport(module, child.lineno, commented))
                    else:
                        graph[module] |= targets
                elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    visit(child, True)
                elif isinstance(child, ast.If) and _is_type_checking(child):
                    continue  # annotations only: not an import at run time
                else:
                    visit(child, in_function)

        visit(ast.parse(source), False)
    return graph, local


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), plus self-loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_it_finds_a_cycle_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_it_reads_the_real_graph():
    graph, _ = _read()
    assert "frames.services.stack" in graph["frames.context.lifecycle"]
    assert "contextops.errors" in graph["frames.budget"]
    assert len(graph) > 100


def test_the_product_modules_import_each_other_without_a_cycle():
    graph, _ = _read()
    assert _cycles(graph) == []


def test_imports_inside_functions_are_few_and_each_says_why():
    _, local = _read()
    where = [f"{item.module}:{item.line}" for item in local]
    assert len(local) <= MAX_IMPORTS_INSIDE_FUNCTIONS, where
    assert [f"{i.module}:{i.line}" for i in local if not i.commented] == []
