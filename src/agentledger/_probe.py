"""The capability probe: what agentledger relies on, checked once per backend at start.

Conflict detection needs an UPDATE to report the rows it *matched* (an engine built
with a custom ``creator=`` on MySQL loses CLIENT_FOUND_ROWS and reports 0 for an
UPDATE that writes the same values); ordering and expiry need microsecond UTC
timestamps; payloads need JSON to come back as stored. The probe uses a temporary
table with agentledger's own column types, so it takes no lock on agentledger's
tables (a first read never waits for a writer) and leaves nothing behind.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Integer,
    MetaData,
    String,
    Table,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.schema import CreateTable, DropTable

from ._dialects import capabilities, locking, tested
from ._limits import MAX_CAPABILITY_LENGTH
from ._translate import translated
from .engine.transactions import brief_transaction
from .errors import DatabaseError, PermissionDeniedError
from .models.types import Identifier, JSONDocument, UTCDateTime, json_text

logger = logging.getLogger("agentledger.probe")

LONGEST_COMPARED_TEXT = MAX_CAPABILITY_LENGTH
"""The most characters of a text column agentledger compares with = (a grant's
capability): an untested database must declare it as a string type, not a LOB."""


def _probe_table(name: str, *, temporary: bool) -> Table:
    """A table with agentledger's own column types, for the probe's checks."""
    return Table(
        name,
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("at", UTCDateTime(), nullable=False),
        Column("doc", JSONDocument(), nullable=False),
        Column("flag", String(8), nullable=False),
        prefixes=["TEMPORARY"] if temporary else [],
    )


_PROBE = _probe_table("agentledger_probe", temporary=True)

PROBE_TIME = datetime(2000, 1, 2, 3, 4, 5, 123456, tzinfo=timezone(timedelta(hours=14)))
PROBE_DOC: dict[str, Any] = {"big": 2**63 - 1, "negative_zero": -0.0, "text": "é ✓ 🚀", "n": [1]}


def drop_temporary_table(connection: Connection, name: str) -> None:
    """Drop a temporary table after its transaction was rolled back.

    PostgreSQL and SQLite roll CREATE TEMPORARY TABLE back with the transaction;
    MariaDB/MySQL do not, and the table would outlive the probe on a pooled
    connection. ``DROP TEMPORARY TABLE`` there can only touch a temporary table.
    """
    if capabilities(connection.dialect).temporary_tables_survive_rollback:
        quoted = connection.dialect.identifier_preparer.quote(name)
        connection.execute(text(f"DROP TEMPORARY TABLE IF EXISTS {quoted}"))


def cluster_of(connection: Connection) -> str | None:
    """The cluster engine behind ``connection``'s database (a ``_dialects.CLUSTERS``
    key), or None for one server: ``"galera"`` when MariaDB says ``wsrep_on`` (SHOW
    VARIABLES answers an empty set, not an error, where the variable is unknown)."""
    if not capabilities(connection.dialect).gap_locks:  # not MariaDB/MySQL
        return None
    with translated(connection.engine.url), brief_transaction(connection):
        found = connection.execute(text("SHOW VARIABLES LIKE 'wsrep_on'")).first()
    return "galera" if found is not None and str(found[1]).upper() == "ON" else None


def probe(connection: Connection) -> None:
    """Raise DatabaseError naming the first capability the backend lacks.

    A database user without the right to create temporary tables skips the probe:
    it can still use agentledger, and its rowcounts are then taken on trust. A dialect
    agentledger was not tested on is probed further (``probe_untested``).
    """
    if not tested(connection.dialect):
        probe_untested(connection)
        return
    began = not connection.in_transaction()
    transaction = connection.begin() if began else connection.begin_nested()
    try:
        with translated(connection.engine.url):
            connection.execute(CreateTable(_PROBE))
            _check(connection, _PROBE)
        logger.debug(
            "the capability probe passed on %s (%s)",
            connection.engine.url.render_as_string(hide_password=True),
            connection.dialect.driver,
        )
    except PermissionDeniedError:
        logger.warning(
            "skipped the capability probe on %s: this user may not create a temporary "
            "table, so update counts are taken on trust",
            connection.engine.url.render_as_string(hide_password=True),
        )
        return
    finally:
        transaction.rollback()
        with translated(connection.engine.url):
            drop_temporary_table(connection, _PROBE.name)
        if began and connection.in_transaction():
            connection.rollback()


def _refuse(what: str, connection: Connection) -> DatabaseError:
    dialect = connection.dialect
    return DatabaseError(
        f"the {dialect.name} backend ({dialect.driver}) failed agentledger's capability "
        f"probe: {what}"
    )


def probe_untested(connection: Connection) -> None:
    """Check what the portable row (``_dialects._UNTESTED``) relies on, on a dialect
    agentledger was not tested on, and raise DatabaseError naming the first thing
    missing: savepoints (a unit of work inside the caller's transaction, a row inserted
    unless another writer stored it first), locking reads (``SELECT ... FOR UPDATE``:
    writers of one record take turns), what ``probe`` checks of the column types, then
    a compared text column of ``LONGEST_COMPARED_TEXT`` characters.
    Its table is an ordinary one, dropped after: such a database may spell temporary
    tables otherwise, or have none."""
    table = _probe_table(f"agentledger_probe_{uuid.uuid4().hex[:12]}", temporary=False)
    url = connection.engine.url.render_as_string(hide_password=True)
    with translated(connection.engine.url):
        if connection.in_transaction():
            connection.rollback()
        with connection.begin():
            _check_savepoints(connection)
        try:
            with translated(connection.engine.url), connection.begin():
                connection.execute(CreateTable(table))
        except PermissionDeniedError:
            logger.warning(
                "probed only savepoints on %s: this user may not create a table, so "
                "locking reads, update counts, timestamps and JSON are taken on trust",
                url,
            )
            return
        try:
            with connection.begin():
                _check(connection, table)
                _check_locking_read(connection, table)
            _check_long_text(connection, f"agentledger_probe_{uuid.uuid4().hex[:12]}")
        finally:
            if connection.in_transaction():
                connection.rollback()
            with connection.begin():
                connection.execute(DropTable(table))
    logger.debug("the capability probe passed on the untested %s", url)


def _check_savepoints(connection: Connection) -> None:
    try:
        with connection.begin_nested():
            connection.execute(select(literal(1))).all()
    except DBAPIError as error:
        raise _refuse(
            "it has no savepoints (SAVEPOINT), which agentledger needs for a unit of work "
            "inside a transaction of yours and to insert a row another writer may store "
            f"first ({type(error.orig).__name__})",
            connection,
        ) from error


def _check_long_text(connection: Connection, name: str) -> None:
    # Run once the user is known to create tables: a refusal here is the column's.
    table = Table(name, MetaData(), Column("text", Identifier(LONGEST_COMPARED_TEXT)))
    try:
        with connection.begin():
            connection.execute(CreateTable(table))
    except DBAPIError as error:
        raise _refuse(
            f"it cannot declare a text column of {LONGEST_COMPARED_TEXT:,} characters that "
            "agentledger compares with = (a grant's capability; on Oracle that takes "
            f"MAX_STRING_SIZE=EXTENDED: docs/dialects.md) ({type(error.orig).__name__})",
            connection,
        ) from error
    with connection.begin():
        connection.execute(DropTable(table))


def _check_locking_read(connection: Connection, table: Table) -> None:
    try:
        connection.execute(locking(select(table.c.id))).all()
    except DBAPIError as error:
        raise _refuse(
            "it has no locking reads (SELECT ... FOR UPDATE), which agentledger needs so "
            f"that writers of one record take turns ({type(error.orig).__name__})",
            connection,
        ) from error


def _check(connection: Connection, table: Table) -> None:
    connection.execute(insert(table).values(id=1, at=PROBE_TIME, doc=PROBE_DOC, flag="same"))
    same = update(table).where(table.c.id == 1).values(flag="same")
    matched = connection.execute(same).rowcount
    if matched != 1:
        raise _refuse(
            f"an UPDATE that matched one row without changing it reported {matched} rows, so "
            "concurrent writers could not be detected (on MySQL/MariaDB, a custom creator= "
            "must pass client_flag=CLIENT.FOUND_ROWS)",
            connection,
        )
    at, doc = connection.execute(select(table.c.at, json_text(table.c.doc))).one()
    if at != PROBE_TIME or at.utcoffset() != UTC.utcoffset(None):
        raise _refuse(
            f"the timestamp {PROBE_TIME.isoformat()} came back as {at!r}: UTC microseconds "
            "are not kept",
            connection,
        )
    if json.loads(doc) != PROBE_DOC:
        raise _refuse(f"JSON came back changed: {doc!r}", connection)
