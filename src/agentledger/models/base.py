"""The declarative base, the shared MetaData and its naming convention."""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

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
    """Declarative base of agentledger's ORM classes."""

    metadata = metadata
