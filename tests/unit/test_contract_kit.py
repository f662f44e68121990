"""agentledger.testing is a kit a third-party store can run: its contract modules use
only agentledger's records, errors and limits, and a missing hook is a named skip."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

import agentledger
import agentledger.testing
from agentledger.testing import Harness

KIT = Path(agentledger.testing.__file__).parent
CONTRACT_MODULES = sorted(
    p for p in KIT.glob("*.py") if p.name not in ("__init__.py", "harness.py")
)
PUBLIC_VALUES = {
    name
    for name in agentledger.__all__
    if isinstance(value := getattr(agentledger, name), type)
    and (issubclass(value, BaseException | BaseModel) or value is agentledger.Limits)
}


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(level, module, names) of every import in the module at ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "", [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((0, alias.name, []) for alias in node.names)
    return found


@pytest.mark.parametrize("path", CONTRACT_MODULES, ids=lambda p: p.name)
def test_a_contract_module_takes_from_agentledger_only_records_errors_and_limits(
    path: Path,
) -> None:
    for level, module, names in _imports(path):
        if level == 0 and module == "agentledger":
            assert set(names) <= PUBLIC_VALUES, f"{path.name} imports {names}"
        else:
            assert level <= 1, f"{path.name} imports ..{module}"
            assert not module.startswith(("agentledger", "sqlalchemy")), path.name


def test_a_test_needing_a_hook_the_store_left_out_is_skipped_naming_the_hook() -> None:
    harness = Harness(ledger=object(), mode="async", backend="mine")
    with pytest.raises(pytest.skip.Exception) as skipped:
        harness.require("configured")
    assert "mine" in str(skipped.value)
    assert "`configured` hook" in str(skipped.value)


def test_a_hook_the_store_gave_is_handed_out() -> None:
    def reopen() -> None: ...

    harness = Harness(ledger=object(), mode="sync", backend="mine", reopen=reopen)
    assert harness.require("reopen") is reopen
