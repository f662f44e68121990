"""No SQL is ever built from user strings: every statement agentledger sends is a
SQLAlchemy construct or a literal, and the few built from text name only constants
or identifiers validated and quoted first (listed here, each with its reason)."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "agentledger"
SQL_CALLS = {"text", "exec_driver_sql", "execute", "executemany"}

# (file, enclosing function) -> why building that statement from text is safe.
REVIEWED = {
    ("_probe.py", "drop_temporary_table"): "a module constant, quoted as an identifier",
    ("engine/sqlite.py", "_on_sqlite_connect"): "PRAGMA with an int constant (no bind for PRAGMA)",
    ("engine/sqlite.py", "sqlite_migration_connection"): "PRAGMA ON/OFF chosen by a bool",
    ("migrations/environment.py", "_create_schema"): "a validated identifier, quoted",
    ("repositories/memory.py", "rebuild_words_index"): "a module constant (the FTS5 table)",
}


def built_statements(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every SQL call whose statement is not a literal."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if isinstance(child, ast.Call) and child.args:
                called = child.func
                called_name = getattr(called, "attr", getattr(called, "id", None))
                first = child.args[0]
                if called_name in SQL_CALLS and isinstance(first, ast.JoinedStr | ast.BinOp):
                    found.append((name, child.lineno))
                if (
                    called_name in SQL_CALLS
                    and isinstance(first, ast.Call)
                    and getattr(first.func, "attr", None) == "format"
                ):
                    found.append((name, child.lineno))
            visit(child, name)

    visit(tree, "<module>")
    return found


def test_statements_are_never_built_from_strings_outside_the_reviewed_places() -> None:
    unexpected = []
    for path in sorted(SOURCE.rglob("*.py")):
        for function, line in built_statements(path):
            if (str(path.relative_to(SOURCE)), function) not in REVIEWED:
                unexpected.append(f"{path.relative_to(SOURCE)}:{line} in {function}()")
    assert unexpected == [], "SQL built from strings: use SQLAlchemy constructs and binds"


def test_the_scanner_finds_a_string_built_statement(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def leak(session, user):\n"
        "    session.execute(text(f\"SELECT * FROM t WHERE id = '{user}'\"))\n"
        "    session.execute(text('SELECT 1 WHERE x = ' + user))\n"
        "    session.execute(text('SELECT {}'.format(user)))\n"
        "    session.execute(text('SELECT 1'))\n"
    )
    assert [line for _, line in built_statements(sample)] == [2, 3, 4]


def test_every_reviewed_place_still_exists() -> None:
    present = {
        (str(path.relative_to(SOURCE)), function)
        for path in SOURCE.rglob("*.py")
        for function, _ in built_statements(path)
    }
    assert set(REVIEWED) <= present, "drop entries that no longer build SQL"
