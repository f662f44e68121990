"""Facts in docs/ that drift when the code changes, checked against the code: the tables
and their columns, how many there are, the environment variables read, the ledger's
options and the loggers. (The URL forms are checked by tests/drivers/test_drivers.py,
the command line reference by tests/docs/test_generated_pages.py.)"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from agentledger import Ledger
from agentledger.models import VERSION_TABLE, metadata

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "agentledger"
NUMBERS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
]


def _page(name: str) -> str:
    return (DOCS / name).read_text()


def _diagrams() -> dict[str, set[str]]:
    """Each table of the pages' mermaid diagrams, with the columns it lists."""
    tables: dict[str, set[str]] = {}
    for page in sorted(DOCS.glob("*.md")):
        for diagram in re.findall(r"```mermaid\n(.*?)```", page.read_text(), re.S):
            for name, body in re.findall(r"^\s*(\w+) \{\n(.*?)^\s*\}", diagram, re.S | re.M):
                columns = {line.split()[1] for line in body.splitlines() if line.strip()}
                tables[name] = columns
    return tables


def test_the_table_diagram_shows_every_table_with_its_columns() -> None:
    drawn = _diagrams()
    assert set(drawn) == set(metadata.tables)
    for name, table in metadata.tables.items():
        assert drawn[name] == {column.name for column in table.columns}, name


def test_the_count_of_tables_given_is_the_models() -> None:
    count = len(metadata.tables)
    sharing = _page("sharing-a-database.md")
    assert f"{NUMBERS[count].capitalize()} tables and a version table" in sharing
    assert f"It finds {NUMBERS[count + 1]} tables it does not know" in sharing
    listed = set(re.findall(r"`(agentledger_\w+)`", sharing.split("## Two migration")[0]))
    assert listed == set(metadata.tables) | {VERSION_TABLE}


def test_the_tables_page_names_every_orm_class() -> None:
    page = _page("tables.md")
    for mapper in metadata_mappers():
        assert f"`{mapper}`" in page, mapper


def metadata_mappers() -> list[str]:
    from agentledger.models.base import Base

    return sorted(mapper.class_.__name__ for mapper in Base.registry.mappers)


def test_every_environment_variable_the_code_reads_is_in_the_configuration_page() -> None:
    read = {
        name
        for path in SRC.rglob("*.py")
        for name in re.findall(r"[\"'](AGENTLEDGER_[A-Z_]+)[\"']", path.read_text())
    }
    assert read
    page = _page("configuration.md")
    table = page.split("## Environment variables")[1].split("\n## ")[0]
    assert read <= set(re.findall(r"^\| `(AGENTLEDGER_[A-Z_]+)` \|", table, re.M)), read


def test_the_configuration_pages_variables_are_the_command_lines_table() -> None:
    from agentledger.environment import markdown_table

    assert markdown_table() in _page("configuration.md")


def test_every_option_of_the_ledger_is_in_the_configuration_page() -> None:
    options = {
        name
        for name in inspect.signature(Ledger.__init__).parameters
        if name != "self" and not name.startswith("_")
    }
    table = _page("configuration.md").split("## The ledger's options")[1].split("\n## ")[0]
    assert options == set(re.findall(r"^\| `(\w+)` \|", table, re.M))


def test_every_logger_of_the_package_is_in_the_operations_page() -> None:
    loggers = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        loggers |= set(re.findall(r"getLogger\(\"(agentledger[\w.]*)\"\)", text))
        if "getLogger(__name__)" in text:
            module = path.relative_to(SRC.parent).with_suffix("")
            loggers.add(".".join(part for part in module.parts if part != "__init__"))
    assert loggers
    table = _page("operations.md").split("## Logging")[1].split("\n## ")[0]
    assert loggers == set(re.findall(r"^\| `(agentledger[\w.]*)` \|", table, re.M))


def _listed_methods() -> dict[str, set[str]]:
    """Each repository of docs/api.md's listing, with the methods it names."""
    block = re.search(r"```text\n(.*?)```", _page("api.md"), re.S)
    assert block is not None
    listed: dict[str, set[str]] = {}
    repository = None
    for line in block[1].splitlines():
        if line.startswith("ledger."):
            heading = re.match(r"ledger\.(\w+)\s", line)
            repository = heading[1] if heading else None
            line = line[heading.end() :] if heading else line
        if repository is not None:
            listed.setdefault(repository, set()).update(
                re.findall(r"(?<![\w.\"`])([a-z_]+)\(", line)
            )
    return listed


def test_the_api_listing_names_every_method_of_every_repository() -> None:
    listed = _listed_methods()
    with Ledger.in_memory() as ledger:
        assert set(listed) == {
            "sessions",
            "messages",
            "steps",
            "grants",
            "checkpoints",
            "app_state",
            "user_state",
            "memory",
        }
        for name, methods in listed.items():
            repository = type(getattr(ledger, name))
            public = {
                method
                for method, _ in inspect.getmembers(repository, callable)
                if not method.startswith("_")
            }
            assert methods == public, name
