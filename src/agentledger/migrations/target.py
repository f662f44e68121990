"""Where a migration command runs: a URL, an Engine or a Connection, and how its errors read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeAlias

from alembic.ddl.impl import DefaultImpl
from alembic.util import CommandError
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.pool import NullPool

from .._dialects import tested
from .._probe import probe_untested
from .._translate import translated
from ..engine import check_supported, create_sync_engine, resolve_url, sqlite_file, typed_url
from ..errors import ValidationError

Target: TypeAlias = "str | URL | Engine | Connection"
"""Where to migrate: a URL, an Engine (connected and released here) or a Connection
(used as it is; its transaction, if any, stays the caller's)."""


def missing_file(target: Target) -> str | None:
    """The path of the SQLite file a URL ``target`` names, when there is no such file
    (connecting would create it: a read-only command must not); else None."""
    if isinstance(target, Connection | Engine):
        return None
    path = sqlite_file(target)
    return path if path is not None and not os.path.exists(path) else None


def url_of(target: Target) -> str | URL:
    """The URL ``target`` names or is connected to, as the caller gave it (for an
    engine agentledger made from a URL: that URL as written, ``typed_url``)."""
    if isinstance(target, Connection):
        return typed_url(target.engine)
    if isinstance(target, Engine):
        return typed_url(target)
    return target


@contextmanager
def reported(target: Target) -> Iterator[None]:
    """Raise errors inside the block as agentledger's own.

    Database and OS errors go through the one translator (``_translate``), which masks
    the password of ``target``'s URL. Alembic's CommandError is a revision it cannot
    find or a range it refuses: the caller's input, so a ValidationError.
    """
    if isinstance(target, Connection | Engine):
        check_supported(target.engine)
    with translated(resolve_url(url_of(target), asynchronous=False)):
        try:
            yield
        except CommandError as exc:
            raise ValidationError(str(exc), path="revision") from exc


def _probe_untested(connection: Connection) -> None:
    """On a dialect agentledger was not tested on, what it lacks is the answer before
    any migration runs (``_probe.probe_untested``); the others are probed by a ledger."""
    if not tested(connection.dialect):
        check_supported(connection.engine)
        probe_untested(connection)
        alembic_can_migrate(connection.dialect)


def alembic_can_migrate(dialect: Dialect | type[Dialect]) -> None:
    """Give Alembic its generic DDL for a dialect that registered none of its own (an
    untested one, whose package ships no Alembic support): plain ALTER TABLE and
    CREATE INDEX, which is all agentledger's migrations ask of a dialect outside the
    three they branch for. Alembic finds a dialect's DDL by a subclass naming it."""
    try:
        DefaultImpl.get_by_dialect(dialect)  # type: ignore[arg-type]
    except KeyError:
        type(f"GenericImpl_{dialect.name}", (DefaultImpl,), {"__dialect__": dialect.name})


@contextmanager
def connected(target: Target) -> Iterator[Connection]:
    """A connection to ``target`` for the block, its errors ``reported``.

    A URL gets an engine of its own, disposed after; an Engine lends a connection; a
    Connection is used as it is. What the block leaves open is committed, except on a
    Connection, whose transaction is the caller's.
    """
    with reported(target):
        if isinstance(target, Connection):
            _probe_untested(target)
            yield target
            return
        engine = (
            target if isinstance(target, Engine) else create_sync_engine(target, poolclass=NullPool)
        )
        try:
            with engine.connect() as connection:
                _probe_untested(connection)
                yield connection
                if connection.in_transaction():
                    connection.commit()
        finally:
            if engine is not target:
                engine.dispose()
