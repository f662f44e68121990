"""The declarative base, the shared MetaData and its naming convention."""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase, InstrumentedAttribute

TABLE_PREFIX = "agentledger_"
"""Every table agentledger owns starts with this; fixed, so no one mistakes whose it is."""

VERSION_TABLE = "agentledger_alembic_version"
"""Alembic's version table for agentledger's own migration stream."""

NAMING_CONVENTION: dict[str, str] = {
    "pk": "pk_%(table_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}
"""Deterministic constraint and index names, at most 60 characters, the same on every
dialect: Alembic needs names to alter constraints, and a host's ``alembic check`` compares
them. (Error translation does not key on them: SQLite reports no constraint name, so a
caller that inserts a key says what a duplicate of it means, see ``duplicate_as``.)"""

metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""The MetaData of agentledger's tables, public for direct queries and Alembic."""

MYSQL_TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


class Base(DeclarativeBase):
    """Declarative base of agentledger's ORM classes.

    The docstring under each mapped column becomes the mapped attribute's ``__doc__``
    and the column's ``doc``, so ``help(AgentStep)`` and editors show it (Python itself
    keeps no attribute docstrings).
    """

    metadata = metadata

    def __init_subclass__(cls, **options: Any) -> None:
        """Map the class, then give each column the docstring written under it."""
        super().__init_subclass__(**options)
        columns = cls.__mapper__.columns  # by attribute name (``metadata_`` -> metadata)
        for name, doc in attribute_docstrings(cls).items():
            attribute = cls.__dict__.get(name)
            if isinstance(attribute, InstrumentedAttribute):
                attribute.__doc__ = doc  # type: ignore[method-assign]
            if name in columns:
                columns[name].doc = doc


def attribute_docstrings(cls: type) -> dict[str, str]:
    """The docstrings written under the attributes of ``cls``'s body, by name (empty
    when its source is not available)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    found = {}
    for statement, following in zip(body.body, body.body[1:], strict=False):
        target = statement.target if isinstance(statement, ast.AnnAssign) else None
        if (
            isinstance(target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[target.id] = inspect.cleandoc(following.value.value)
    return found
