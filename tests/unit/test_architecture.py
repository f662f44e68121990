"""The house rules, checked on the source: imports run one way, down the floors of
``FLOORS``, and each part keeps to its own (docs/design.md's layout draws the same house)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "agentledger"
OPTIONAL = {
    "playwright",
    "uvicorn",
    "starlette",
    "jinja2",
    "langgraph",
    "ormsgpack",  # LangGraph's msgpack, which the viewer decodes with
    "agents",
    "google",
}
"""Optional dependencies: imported inside functions so the core runs without them."""


FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Kit", ("agentledger.testing",)),
    ("Face", ("agentledger.cli", "agentledger.ui", "agentledger.__main__")),
    ("Integrations", ("agentledger.integrations",)),
    ("Surface", ("agentledger",)),
    (
        "Ledger",
        ("agentledger.ledger", "agentledger._runner", "agentledger.uow", "agentledger._awaited"),
    ),
    ("Maintenance", ("agentledger.transfer", "agentledger.retention", "agentledger._host")),
    ("Repositories", ("agentledger.repositories",)),
    ("Migrations", ("agentledger.migrations",)),
    (
        "Plumbing",
        (
            "agentledger.engine",
            "agentledger._driver",
            "agentledger._dialects",
            "agentledger._translate",
            "agentledger._retry",
            "agentledger._concurrency",
            "agentledger._probe",
        ),
    ),
    ("Models", ("agentledger.models",)),
    (
        "Records",
        (
            "agentledger.records",
            "agentledger.langgraph_records",
            "agentledger.errors",
            "agentledger.ids",
            "agentledger.clock",
            "agentledger._json",
            "agentledger._checks",
            "agentledger._limits",
            "agentledger.environment",
        ),
    ),
)
"""The parts of the house, top floor first: a module imports only from its own floor
and the floors below it. The kit reaches the public surface (``agentledger``) from above
it, as a third-party store does; ``_host`` is the protocol maintenance asks of its
ledger, so it sits with maintenance."""
NEVER = (
    ("Repositories", "Integrations", "the core knows no framework"),
    ("Repositories", "Face", "the core knows no command line or page"),
    ("Repositories", "Kit", "the core knows no tests"),
    ("Repositories", "Ledger", "a repository runs in the scope it is given"),
    ("Models", "Repositories", "tables know nothing of operations"),
    ("Records", "Models", "records and limits are the wire shape, not the storage shape"),
    ("Maintenance", "Models", "maintenance reaches tables only through repositories"),
    ("Integrations", "Repositories", "integrations speak the public API"),
    ("Integrations", "Models", "integrations speak the public API"),
    ("Kit", "Repositories", "the contract suite speaks the public API"),
)
"""Imports that must not exist, whatever the floors allow, and why."""
PUBLIC_TO_INTEGRATIONS = ("Surface", "Ledger", "Records")
"""What an integration may import: the public surface, the ledgers and their units of
work, and the records, errors and ids they take and give."""


def floor_of(module: str) -> int:
    """The index in ``FLOORS`` of the part holding ``module`` (its longest prefix)."""
    found = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(FLOORS)
        for prefix in prefixes
        if module == prefix or (prefix != "agentledger" and module.startswith(f"{prefix}."))
    ]
    assert found, f"{module} is in no part of FLOORS: place it"
    return max(found)[1]


def part_of(module: str) -> str:
    return FLOORS[floor_of(module)][0]


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


def test_every_module_has_a_place_in_the_floors() -> None:
    for module in modules():
        floor_of(module)


def test_no_import_climbs_a_floor() -> None:
    climbing = [
        f"{part_of(module)} {module} imports {part_of(target)} {target}"
        for module, targets in imports().items()
        for target in targets
        if floor_of(target) < floor_of(module)
    ]
    assert not climbing


@pytest.mark.parametrize(("below", "above", "why"), NEVER, ids=lambda v: str(v))
def test_a_part_never_imports_what_it_must_not_know(below: str, above: str, why: str) -> None:
    found = [
        f"{module} imports {target}"
        for module, targets in imports().items()
        if part_of(module) == below
        for target in targets
        if part_of(target) == above
    ]
    assert not found, why


def test_integrations_use_only_the_public_api() -> None:
    found = [
        f"{module} imports {target}"
        for module, targets in imports().items()
        if part_of(module) == "Integrations"
        for target in targets
        if part_of(target) not in ("Integrations", *PUBLIC_TO_INTEGRATIONS)
    ]
    assert not found


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


DIALECT_HOMES = ("engine/", "_dialects.py", "_driver.py", "_translate.py", "models/types.py")
"""The modules that read a dialect's name (docs/design.md: the layout): the capabilities table
(``_dialects.py``), and those that speak to drivers and types: the engine package
(URLs, SQLite set-up, pool settings), driver SQL's per-driver hooks, error
translation and column types. A path ending in ``/`` is a whole package."""
DIALECT_NAMES = {"postgresql", "sqlite", "mysql", "mariadb"}


def _is_dialect_home(path: Path) -> bool:
    relative = path.relative_to(PACKAGE).as_posix()
    return any(
        relative.startswith(home) if home.endswith("/") else relative == home
        for home in DIALECT_HOMES
    )


def _outside_the_homes() -> list[Path]:
    return [path for path in modules().values() if not _is_dialect_home(path)]


def test_dialect_names_are_read_only_in_the_capabilities_table_and_driver_modules() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}"
        for path in _outside_the_homes()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in DIALECT_NAMES
    ]
    assert not found


def test_no_decision_compares_a_dialect_name_outside_the_homes() -> None:
    decision = re.compile(
        r"(dialect\.name|get_backend_name\(\)|dialect_name)\s*(==|!=|\bin\b|\bnot in\b)"
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in _outside_the_homes()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if decision.search(line)
    ]
    assert not found


def test_the_capabilities_table_is_data_without_a_decision_on_a_name() -> None:
    source = (PACKAGE / "_dialects.py").read_text()
    assert not re.search(r"(==|!=)\s*\"(postgresql|sqlite|mysql|mariadb)\"", source)
    assert not re.search(r"\"(postgresql|sqlite|mysql|mariadb)\"\s*(==|!=)", source)


def test_every_supported_dialect_has_a_row_of_capabilities() -> None:
    from agentledger import _dialects
    from agentledger.engine import urls

    assert set(_dialects.CAPABILITIES) == set(urls._SYNC_DRIVERS)
