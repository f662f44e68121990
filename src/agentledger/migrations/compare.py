"""What agentledger's autogenerate compares, and the stamp check built on it.

``comparison_options`` are the options agentledger's environment gives Alembic
(`alembic check`, `alembic revision --autogenerate` from a checkout), so the check
before a stamp sees exactly what they see. ``shape_problems`` says how a database's
tables differ from one revision's shape, for ``stamp``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, NamedTuple

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, MetaData, create_engine
from sqlalchemy.pool import NullPool

from ..engine import brief_transaction
from ..models import TABLE_PREFIX, TEXT_INDEXES, VERSION_TABLE, WORDS_TABLE, metadata
from ..models.memory import UNCOMPARED_INDEX_WARNING
from .locks import LEASE_TABLE
from .scripts import alembic_config, head


def is_ours(name: str | None) -> bool:
    """Whether the table ``name`` is one of agentledger's (its version table included)."""
    return name is not None and name.startswith(TABLE_PREFIX)


def include_agentledger_names(name: str | None, type_: str, _parents: Any) -> bool:
    """Autogenerate filter of agentledger's own environment: only our tables (not the
    lease row's table that migrations on a Galera cluster take turns by, nor SQLite's
    FTS5 table of memory items' words and its shadow tables, which no model describes)."""
    if type_ == "table":
        return is_ours(name) and name != LEASE_TABLE and not str(name).startswith(WORDS_TABLE)
    return True


def include_agentledger_objects(
    item: Any, name: str | None, type_: str, _reflected: bool, _compare_to: Any
) -> bool:
    """Autogenerate filter of the objects compared: not the text indexes of memory
    items' words, each made for one database family by migration 0006 (PostgreSQL's
    expression index, MariaDB/MySQL's FULLTEXT index), which Alembic compares on every
    database and cannot reflect faithfully (tests/migrations/test_0006_memory.py
    checks them)."""
    return not (type_ == "index" and name in TEXT_INDEXES)


@contextmanager
def quiet_about_text_indexes() -> Iterator[None]:
    """Autogenerate without its warning that it cannot compare PostgreSQL's text index
    (an expression) on other databases: ``include_agentledger_objects`` leaves it out.
    (The models filter that warning out once; this holds under filters reset since, as
    a test runner's.)"""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=UNCOMPARED_INDEX_WARNING, category=UserWarning)
        yield


def target_metadata(schema: str | None) -> MetaData:
    """agentledger's tables, placed in ``schema`` when there is one."""
    return metadata if schema is None else copied_metadata(schema)


def copied_metadata(schema: str | None) -> MetaData:
    """A copy of agentledger's tables (in ``schema``, when given) to change freely."""
    copy = MetaData(naming_convention=metadata.naming_convention)
    for table_ in metadata.sorted_tables:
        copied = (
            table_.to_metadata(copy) if schema is None else table_.to_metadata(copy, schema=schema)
        )
        # to_metadata leaves out an index's ddl_if (SQLAlchemy 2.1), and each text
        # index is made on its own database family only.
        conditions = {index.name: index._ddl_if for index in table_.indexes}
        for index in copied.indexes:
            index._ddl_if = conditions.get(index.name)
    return copy


def comparison_options(schema: str | None) -> dict[str, Any]:
    """The options of Alembic's MigrationContext that compare our tables, and only
    ours, in ``schema`` (default: the connection's), column types included."""
    options: dict[str, Any] = {
        "target_metadata": target_metadata(schema),
        "version_table": VERSION_TABLE,
        "version_table_schema": schema,
        "include_name": include_agentledger_names,
        "include_object": include_agentledger_objects,
        "compare_type": True,
    }
    if schema is not None:
        # Autogenerate must look in the schema, and only there.
        options["include_schemas"] = True
        options["include_name"] = _include_names_in(schema)
    return options


def _include_names_in(schema: str) -> Callable[[str | None, str, Any], bool]:
    def include(name: str | None, type_: str, parents: Any) -> bool:
        if type_ == "schema":
            return name == schema
        return include_agentledger_names(name, type_, parents)

    return include


class Difference(NamedTuple):
    """One way the database's tables differ from the models."""

    key: tuple[str, ...]
    """What differs, comparable between two databases."""
    text: str
    """How to say it."""
    absent_text: str
    """How to say it when the revision has it and the database does not."""


def differences(connection: Connection, schema: str | None) -> list[Difference]:
    """How the tables on ``connection`` differ from the models (nothing: at head)."""
    options = comparison_options(schema)
    with brief_transaction(connection):
        context = MigrationContext.configure(connection, opts=options)
        with quiet_about_text_indexes():
            diffs = compare_metadata(context, options["target_metadata"])
    flat: list[Any] = []
    for diff in diffs:
        flat.extend(diff if isinstance(diff, list) else [diff])
    return [_described(diff) for diff in flat]


def shape_problems(actual: list[Difference], revision: str) -> list[str]:
    """How tables with the ``actual`` differences from the models differ from ``revision``.

    A private SQLite database migrated to ``revision`` is compared with the models
    too; the tables have the revision's shape when both differ from the models in
    the same way.
    """
    found = {d.key: d for d in actual}
    expected = _expected_differences(revision)
    problems = [d.text for key, d in found.items() if key not in expected]
    problems += [
        d.absent_text.format(revision=revision) for key, d in expected.items() if key not in found
    ]
    return problems


@cache
def _expected_differences(revision: str) -> dict[tuple[str, ...], Difference]:
    if revision == head():
        return {}
    engine = create_engine("sqlite://", poolclass=NullPool)
    try:
        with engine.connect() as connection:
            command.upgrade(alembic_config(connection=connection), revision)
            return {d.key: d for d in differences(connection, None)}
    finally:
        engine.dispose()


def _described(diff: Sequence[Any]) -> Difference:
    kind = diff[0]
    if kind in ("add_table", "remove_table"):
        subject, what = f"table {diff[1].name}", "table"
    elif kind in ("add_column", "remove_column"):
        subject, what = f"column {diff[2]}.{diff[3].name}", "column"
    elif kind in ("add_index", "remove_index", "add_constraint", "remove_constraint"):
        item = diff[1]
        what = "index" if "index" in kind else "constraint"
        subject = f"{what} {item.name} on {item.table.name}"
    elif kind in ("add_fk", "remove_fk"):
        subject, what = f"foreign key {diff[1].name} on {diff[1].parent.name}", "foreign key"
    elif kind.startswith("modify_"):
        attribute = kind.removeprefix("modify_")
        subject = f"column {diff[2]}.{diff[3]}"
        text = f"{subject} has {attribute} {diff[5]!s}, expected {diff[6]!s}"
        return Difference(
            (kind, diff[2], diff[3]), text, f"{subject} differs from revision {{revision}}"
        )
    else:
        return Difference((kind, repr(diff)), f"{kind}: {diff!r}", f"{kind} at {{revision}}")
    if kind.startswith("add_"):
        return Difference(
            (what, subject),
            f"{subject} is missing",
            f"{subject} exists, but revision {{revision}} does not have it",
        )
    return Difference(
        (what, subject),
        f"{subject} is not part of agentledger",
        f"{subject} is missing (revision {{revision}} has it)",
    )
