"""The house rules, checked on the source: imports run one way, and each part keeps to
its own (README's Layout; /work/shared/architecture.json is the drawing)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "agentledger"
OPTIONAL = {"playwright", "uvicorn", "starlette", "jinja2", "langgraph", "agents", "google"}
"""Optional dependencies: imported inside functions so the core runs without them."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def _resolve(module: str, node: ast.ImportFrom, path: Path) -> str:
    if node.level == 0:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _in_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


@cache
def imports() -> dict[str, set[str]]:
    """Each module's runtime imports of other agentledger modules (TYPE_CHECKING ones
    left out)."""
    graph: dict[str, set[str]] = {}
    known = modules()
    for module, path in known.items():
        tree = ast.parse(path.read_text())
        parents = {
            child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)
        }
        found: set[str] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or _in_type_checking(node, parents):
                continue
            target = _resolve(module, node, path)
            for alias in node.names:
                name = f"{target}.{alias.name}"
                if name in known:
                    found.add(name)
                elif target in known:
                    found.add(target)
        graph[module] = found - {module}
    return graph


def test_no_two_modules_import_each_other_through_any_path() -> None:
    graph = imports()
    state: dict[str, str] = {}
    cycle: list[str] = []

    def visit(module: str, trail: list[str]) -> bool:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycle.extend(
                    [*trail[trail.index(target) :], target] if target in trail else [target]
                )
                return True
            if target not in state and visit(target, [*trail, target]):
                return True
        state[module] = "done"
        return False

    for module in sorted(graph):
        if module not in state and visit(module, [module]):
            break
    assert not cycle, " -> ".join(cycle)


def test_no_import_inside_a_function_except_optional_dependencies() -> None:
    found = []
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    names = (
                        [inner.module or ""]
                        if isinstance(inner, ast.ImportFrom)
                        else [alias.name for alias in inner.names]
                    )
                    if not all(name.split(".")[0] in OPTIONAL for name in names):
                        found.append(f"{module}.{node.name}: {ast.unparse(inner)}")
    assert not found


def test_no_public_function_is_an_a_prefixed_async_twin() -> None:
    defined = {
        node.name
        for path in modules().values()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    }
    # A framework's adapter implements the framework's own interface, names included
    # (LangGraph's savers have aget_tuple, aput...).
    twins = [
        f"{module}.{node.name}"
        for module, path in modules().items()
        if not module.startswith("agentledger.integrations.")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.AsyncFunctionDef)
        and node.name.startswith("a")
        and node.name[1:] in defined
    ]
    assert not twins, "the async twin of X is AsyncClass.X, never aX"


@pytest.mark.parametrize("part", ["agentledger.transfer", "agentledger.retention"])
def test_maintenance_reaches_the_tables_only_through_repositories(part: str) -> None:
    graph = imports()
    mine = [module for module in graph if module == part or module.startswith(f"{part}.")]
    assert mine
    reaching = {
        f"{module} imports {target}"
        for module in mine
        for target in graph[module]
        if target == "agentledger.models" or target.startswith("agentledger.models.")
    }
    assert not reaching


def test_the_repositories_never_import_the_ledger_or_the_unit_of_work() -> None:
    graph = imports()
    upward = {
        f"{module} imports {target}"
        for module in graph
        if module.startswith("agentledger.repositories")
        for target in graph[module]
        if target in ("agentledger.ledger", "agentledger.uow", "agentledger.cli")
        or target.startswith(("agentledger.transfer", "agentledger.cli."))
    }
    assert not upward


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for module, path in modules().items():
        tree = ast.parse(path.read_text())
        if not ast.get_docstring(tree):
            missing.append(module)
        stack: list[tuple[str, list[ast.stmt]]] = [(module, tree.body)]
        while stack:
            prefix, body = stack.pop()
            for node in body:
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    continue
                if node.name.startswith(("_", "test_")):
                    continue  # private, or a contract test (its name is its specification)
                if not ast.get_docstring(node):
                    missing.append(f"{prefix}.{node.name}")
                if isinstance(node, ast.ClassDef):
                    stack.append((f"{prefix}.{node.name}", node.body))
    assert not missing


DIALECT_HOMES = {"engine.py", "_dialects.py", "_translate.py", "types.py"}
"""The modules where a dialect decides something, each saying why (README: Layout)."""


def test_dialect_decisions_are_taken_only_in_their_four_modules() -> None:
    decision = re.compile(
        r"(dialect\.name|get_backend_name\(\)|dialect_name)\s*(==|!=|\bin\b|\bnot in\b)"
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in modules().values()
        if path.name not in DIALECT_HOMES
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if decision.search(line)
    ]
    assert not found
