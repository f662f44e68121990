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
    select,
    text,
    update,
)
from sqlalchemy.schema import CreateTable

from ._dialects import capabilities
from ._translate import translated
from .engine.transactions import brief_transaction
from .errors import DatabaseError, PermissionDeniedError
from .models.types import JSONDocument, UTCDateTime, json_text

logger = logging.getLogger("agentledger.probe")
_PROBE = Table(
    "agentledger_probe",
    MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("doc", JSONDocument(), nullable=False),
    Column("flag", String(8), nullable=False),
    prefixes=["TEMPORARY"],
)

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
    it can still use agentledger, and its rowcounts are then taken on trust.
    """
    began = not connection.in_transaction()
    transaction = connection.begin() if began else connection.begin_nested()
    try:
        with translated(connection.engine.url):
            connection.execute(CreateTable(_PROBE))
            _check(connection)
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


def _check(connection: Connection) -> None:
    connection.execute(insert(_PROBE).values(id=1, at=PROBE_TIME, doc=PROBE_DOC, flag="same"))
    same = update(_PROBE).where(_PROBE.c.id == 1).values(flag="same")
    matched = connection.execute(same).rowcount
    if matched != 1:
        raise _refuse(
            f"an UPDATE that matched one row without changing it reported {matched} rows, so "
            "concurrent writers could not be detected (on MySQL/MariaDB, a custom creator= "
            "must pass client_flag=CLIENT.FOUND_ROWS)",
            connection,
        )
    at, doc = connection.execute(select(_PROBE.c.at, json_text(_PROBE.c.doc))).one()
    if at != PROBE_TIME or at.utcoffset() != UTC.utcoffset(None):
        raise _refuse(
            f"the timestamp {PROBE_TIME.isoformat()} came back as {at!r}: UTC microseconds "
            "are not kept",
            connection,
        )
    if json.loads(doc) != PROBE_DOC:
        raise _refuse(f"JSON came back changed: {doc!r}", connection)
