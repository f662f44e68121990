"""What each database can do, where agentledger's statements depend on it: one table.

A statement that differs by database lives with the aggregate it writes (a
repository module, ``migrations/locks.py``, ``retention.py``) and asks this table
what the database can do, never which database it is. So the table is the one place
outside ``engine/``, ``_translate.py`` and ``models/types.py`` where a dialect's name
is read (the architecture test checks it), and a new database is one more row. Beside
it, ``locking``: every locking read goes through it, since SQL Server's lock is a table
hint keyed by the dialect's name rather than a clause.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, TypeVar

from sqlalchemy import FromClause, Join, Select, TableClause
from sqlalchemy import insert as portable_insert
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect

from .environment import PROFILE, EnvironmentValueError, value_of


class LockHints(NamedTuple):
    """The table hints that take a locking read's lock where the database locks through
    hints on the table rather than ``FOR UPDATE`` (``Capabilities.lock_hints``)."""

    update: str
    """The hint of ``FOR UPDATE``: the rows read stay locked against other writers."""
    share: str
    """The hint of ``FOR SHARE`` (and ``FOR KEY SHARE``): the rows read stay as read."""


@dataclass(frozen=True)
class Capabilities:
    """What one database family can do that agentledger's statements depend on."""

    update_returning: bool
    """``UPDATE ... RETURNING`` (PostgreSQL, SQLite): a counter or a row read back in
    the UPDATE. Without it a row is read by a SELECT under the UPDATE's lock."""
    last_insert_id: bool
    """``LAST_INSERT_ID(expr)`` (MariaDB/MySQL): a counter an UPDATE moved, read back by
    ``SELECT LAST_INSERT_ID()`` on the connection, which reads no table. Without it or
    ``update_returning``, the counter is read from its row, under the UPDATE's lock."""
    dml_in_cte: bool
    """Data-modifying statements inside ``WITH`` (PostgreSQL): a write and the rows that
    depend on it in one statement, one round trip. SQLite and MariaDB/MySQL have none."""
    insert: Callable[..., Any]
    """The dialect's INSERT construct, with its spelling of an upsert."""
    upsert: Literal["on_conflict", "on_duplicate_key"] | None
    """How an INSERT meets a stored key: ``ON CONFLICT`` (PostgreSQL, SQLite), or ``ON
    DUPLICATE KEY UPDATE`` (MariaDB/MySQL; ``INSERT IGNORE`` would turn other errors
    into warnings, and a found row counts as changed, so a collision cannot be told
    from an insert there). None: a plain INSERT inside a savepoint, and a duplicate
    key read as the row being there (``_statements.inserted_unless_stored``)."""
    gap_locks: bool
    """InnoDB's locking (MariaDB/MySQL): a locking read of a missing row takes a gap
    lock, so two such transactions deadlock on their INSERTs, and a duplicate key
    leaves a shared lock on the stored row, so creators of one row must take turns.
    PostgreSQL locks no missing row; SQLite runs one write transaction at a time."""
    key_share_locks: bool
    """``FOR KEY SHARE`` (PostgreSQL): a read that blocks a delete of the row but not
    other writers of its non-key columns."""
    lock_hints: LockHints | None
    """Where a locking read's lock is a table hint (SQL Server, whose SQLAlchemy dialect
    drops ``with_for_update()`` without a word): ``locking`` adds it beside
    ``FOR UPDATE``. None: the database reads ``FOR UPDATE``/``FOR SHARE``. Not a fast
    path: without it a locking read is a plain read, so the portable profile keeps it."""
    migration_lock: Literal["advisory", "named", "write_transaction", "none"]
    """What serialises concurrent upgraders: PostgreSQL's session-level advisory lock,
    MariaDB/MySQL's ``GET_LOCK`` (their DDL commits implicitly), or SQLite's one
    ``BEGIN IMMEDIATE`` transaction around the whole run. ``none``: a database
    agentledger was not tested on, where it knows no lock that outlives DDL; upgrades
    there must run from one process (the warning of ``engine.check_supported`` says so)."""
    snapshot_read: Literal["isolation_option", "consistent_snapshot", "first_read"]
    """How a long read sees one snapshot: PostgreSQL's READ COMMITTED takes one per
    statement, so REPEATABLE READ READ ONLY by connection option; MariaDB/MySQL have no
    such option in SQLAlchemy, so ``START TRANSACTION ... WITH CONSISTENT SNAPSHOT``;
    SQLite's deferred BEGIN reads one snapshot from its first read (WAL)."""
    cursors_need_transaction: bool
    """PostgreSQL declares server-side cursors only inside a transaction: a read in
    AUTOCOMMIT fetches its answer at once."""
    json_needs_cast: bool
    """JSON text agentledger serialised itself must be cast to ``json`` (PostgreSQL,
    whose drivers send the parameter as text); SQLite and MariaDB keep JSON as text."""
    json_key_match: Literal["jsonb", "json_type", "json_type_without_bool"] | None
    """How a JSON object's key is compared with a value exactly in SQL: PostgreSQL's
    JSONB equality; SQLite's ``json_type`` and ``json_extract``; MariaDB/MySQL's
    ``JSON_TYPE`` and unquoted text, which cannot tell a boolean (left to Python).
    None: every comparison is made in Python, on the decoded value."""
    json_object_rows: Literal["json_each_text", "json_each", None]
    """The table-valued function giving a JSON object's entries as rows (PostgreSQL,
    SQLite); MariaDB/MySQL's ``JSON_TABLE`` walks arrays, not an object's keys."""
    row_values: bool
    """Row-value comparisons, ``(a, b) IN ((1, 2), ...)`` and a keyset's ``(a, b) < (1,
    2)`` (PostgreSQL, SQLite, MariaDB/MySQL). Without them (SQL Server; Oracle, which
    has no ``<`` of rows) a set of keys is matched group by group, ``(a = 1 AND b IN
    (...)) OR ...`` (``_statements.rows_in``), and a keyset spelled column by column
    (``_statements.rows_before``), which an index on the columns serves alike."""
    lateral: bool
    """A correlated probe per row as ``LATERAL ... LIMIT 1`` (PostgreSQL); SQLite has
    no LATERAL and probes through a LEFT JOIN its planner never reorders."""
    temporary_tables_survive_rollback: bool
    """MariaDB/MySQL keep a CREATE TEMPORARY TABLE when its transaction rolls back."""
    index_hints: bool
    """``FORCE INDEX`` (MariaDB/MySQL), for where their optimizer would scan a table
    under a locking read and lock every session's rows."""
    driver_sql: bool
    """The fast path of the LangGraph store's hot calls (``_driver``: statements
    compiled once and run on the DBAPI cursor) works here: each of their reads is one
    statement that can be compiled once (``json_object_rows``). MariaDB/MySQL's take
    two, the second with an expanding IN list that is compiled anew for each length."""
    single_file: bool
    """A database that is one local file (SQLite): its free pages are given back only
    by VACUUM, its migrations rebuild tables in batch mode, which needs a live
    database (no offline SQL) and one transaction with foreign keys off, and it has
    no server replicas a ledger could read from (``readers=`` is refused)."""
    text_index: Literal["tsvector", "fts5", "fulltext"] | None
    """The database's own text index over memory items' words, which keyword search
    reads through (``repositories/_keywords.py``): PostgreSQL's GIN index of
    ``to_tsvector('simple', words)``; SQLite's FTS5 table kept by triggers (where the
    SQLite build has FTS5: else every item under the prefix is read); MariaDB/MySQL's
    FULLTEXT index, which holds no word shorter than its minimum token, none of its
    stopwords, and a transaction's writes only after its COMMIT. None: every item under
    the prefix is read and its words counted in Python."""
    retry_attempts: int
    """How many attempts a ledger given no ``RetryPolicy`` makes of a call that fails
    transiently (``RetryPolicy.attempts``). One server aborts a transaction to keep
    it serializable only when writers meet on one row, and 4 attempts absorb that; a
    multi-primary cluster (a row the probe sets apart) aborts far more at COMMIT and
    needs a larger budget."""


_POSTGRESQL = Capabilities(
    update_returning=True,
    last_insert_id=False,
    dml_in_cte=True,
    insert=postgresql_insert,
    upsert="on_conflict",
    gap_locks=False,
    key_share_locks=True,
    lock_hints=None,
    migration_lock="advisory",
    snapshot_read="isolation_option",
    cursors_need_transaction=True,
    json_needs_cast=True,
    json_key_match="jsonb",
    json_object_rows="json_each_text",
    row_values=True,
    lateral=True,
    temporary_tables_survive_rollback=False,
    index_hints=False,
    driver_sql=True,
    single_file=False,
    text_index="tsvector",
    retry_attempts=4,
)
_SQLITE = Capabilities(
    update_returning=True,
    last_insert_id=False,
    dml_in_cte=False,
    insert=sqlite_insert,
    upsert="on_conflict",
    gap_locks=False,
    key_share_locks=False,
    lock_hints=None,
    migration_lock="write_transaction",
    snapshot_read="first_read",
    cursors_need_transaction=False,
    json_needs_cast=False,
    json_key_match="json_type",
    json_object_rows="json_each",
    row_values=True,
    lateral=False,
    temporary_tables_survive_rollback=False,
    index_hints=False,
    driver_sql=True,
    single_file=True,
    text_index="fts5",
    retry_attempts=4,
)
_MYSQL = Capabilities(
    update_returning=False,
    last_insert_id=True,
    dml_in_cte=False,
    insert=mysql_insert,
    upsert="on_duplicate_key",
    gap_locks=True,
    key_share_locks=False,
    lock_hints=None,
    migration_lock="named",
    snapshot_read="consistent_snapshot",
    cursors_need_transaction=False,
    json_needs_cast=False,
    json_key_match="json_type_without_bool",
    json_object_rows=None,
    row_values=True,
    lateral=True,
    temporary_tables_survive_rollback=True,
    index_hints=True,
    driver_sql=False,
    single_file=False,
    text_index="fulltext",
    retry_attempts=4,
)

_GALERA = replace(_MYSQL, retry_attempts=30)
"""MariaDB Galera (the probe finds ``wsrep_on``): MariaDB's row, but for a larger retry
budget. Written on several nodes, Galera aborts a transaction that lost certification at
COMMIT (errno 1213), and 4 attempts let 213 of 800 blind appends across 3 nodes fail
where one node failed none (``shared/research/scaleout.md``). Measured here with 8
writers over 3 nodes, each making 30 blind appends and 30 steps on one session (8
runs): each further attempt was needed by about 0.7 times as many calls as the one
before, and the most any call needed was 10, which 10 attempts therefore left to fail
now and then (tests/scaleout/test_galera_writers.py saw 4 of 240 calls give up); 30
leave a margin of about 0.7**20 times that. The waits are capped at the policy's
``max_delay``. The cluster's other rules: its named locks are node-local, so migrations
take turns by a certified row (``migrations/locks.py``), and a transaction waits for
the cluster's earlier commits (``GALERA_SYNC_WAIT``, the ledgers' ``read_your_writes``)."""

GALERA_SYNC_WAIT = 15
"""The ``wsrep_sync_wait`` a Galera connection of agentledger's runs with: every kind of
statement (1 reads and BEGIN, 2 UPDATE and DELETE, 4 INSERT and REPLACE, 8 SHOW) first
waits until the node has applied what the cluster committed before. MariaDB waits only
at a transaction's first statement (not inside an active one), so this is one wait per
transaction whatever it begins with. 1 alone left a transaction that begins with a
write unwaited: the driver begins no transaction with a statement of its own, so a
revision-checked UPDATE on a node that had not applied the record's last save matched
no row (a false ``ConflictError("stale")``, seen through the Galera relay in CI) or
was aborted by the applier (21 of 1,000 saves alternating between two nodes retried
with 1, none with 15)."""


_UNTESTED = Capabilities(
    update_returning=False,
    last_insert_id=False,
    dml_in_cte=False,
    insert=portable_insert,
    upsert=None,
    # Nothing is known of its locking: a missing row is inserted first, in a savepoint
    # (``insert_if_absent``), which is right whether or not a locking read takes a gap.
    gap_locks=False,
    key_share_locks=False,
    lock_hints=None,
    migration_lock="none",
    snapshot_read="first_read",
    # Fetching a read's answer at once is right everywhere; a cursor held open outside
    # a transaction is not.
    cursors_need_transaction=True,
    # Its JSON type may be a type of its own (DuckDB's, CockroachDB's JSONB), which
    # text agentledger serialised itself must be cast to; where JSON is text the cast
    # is to text.
    json_needs_cast=True,
    json_key_match=None,
    json_object_rows=None,
    row_values=False,
    lateral=False,
    temporary_tables_survive_rollback=False,
    index_hints=False,
    driver_sql=False,
    single_file=False,
    text_index=None,
    retry_attempts=4,
)
"""A dialect agentledger was not tested on: the portable profile, with what a database
*is* assumed at its most cautious. The capability probe checks what this row relies on
before a ledger uses such a database (``_probe.probe_untested``)."""


_ON_PAPER: dict[str, Capabilities] = {
    "oracle": replace(_UNTESTED, json_needs_cast=False),
    # UPDLOCK is held to the end of the transaction and conflicts with other update
    # locks, as FOR UPDATE does; REPEATABLEREAD holds the shared locks of the rows read
    # to the end of it, as FOR SHARE does (HOLDLOCK, which is SERIALIZABLE, would lock
    # the ranges between them too); ROWLOCK keeps both to the rows (docs: "Table Hints
    # (Transact-SQL)").
    "mssql": replace(
        _UNTESTED,
        json_needs_cast=False,
        lock_hints=LockHints(
            update="WITH (UPDLOCK, ROWLOCK)", share="WITH (REPEATABLEREAD, ROWLOCK)"
        ),
    ),
}
"""The untested dialects whose statements are compiled in agentledger's tests
(tests/dialects/test_compiled_dialects.py): their JSON columns are text
(``models/types.py``: CLOB on Oracle, NVARCHAR(max) on SQL Server), which JSON text
goes into as it is."""


def portable(found: Capabilities) -> Capabilities:
    """``found`` with every fast path off: each operation as SQLAlchemy's ORM and Core
    give it on any dialect (no RETURNING, no DML in CTEs, no upserts, no JSON functions
    or text index in SQL, no row values, no LATERAL, no index hints, no driver SQL, no
    FOR KEY SHARE),
    with the same guarantees. What the database *is* stays: its locking hazards
    (``gap_locks``), how its JSON parameters are typed, how its migrations and long
    reads take turns and snapshots, its retry budget; a statement must honour those
    whatever path it takes."""
    return replace(
        found,
        update_returning=False,
        last_insert_id=False,
        dml_in_cte=False,
        insert=portable_insert,
        upsert=None,
        key_share_locks=False,
        json_key_match=None,
        json_object_rows=None,
        row_values=False,
        lateral=False,
        index_hints=False,
        driver_sql=False,
        text_index=None,
    )


PROFILES = ("native", "portable")
"""The values of ``AGENTLEDGER_PROFILE``: each database's fast paths, or none of them."""


def profile_of(environ: dict[str, str] | None = None) -> str:
    """The profile ``AGENTLEDGER_PROFILE`` asks for (``native`` when unset).

    Raises:
        EnvironmentValueError: a value not in ``PROFILES``.
    """
    wanted = value_of(PROFILE, environ) or "native"
    if wanted not in PROFILES:
        raise EnvironmentValueError(
            f"{PROFILE.name}={wanted!r}: takes native or portable; or unset it"
        )
    return wanted


_NATIVE: dict[str, Capabilities] = {
    "postgresql": _POSTGRESQL,
    "sqlite": _SQLITE,
    "mysql": _MYSQL,
    # SQLAlchemy names MariaDB's dialect apart; agentledger treats it as MySQL.
    "mariadb": _MYSQL,
}
PROFILE_IN_USE = profile_of()
"""The process's profile, read once: statements built once per dialect (the prebuilt
ones of ``repositories``, ``_driver``'s) then agree with every later call."""
_IN_USE: Callable[[Capabilities], Capabilities] = (
    portable if PROFILE_IN_USE == "portable" else (lambda found: found)
)

CLUSTERS: dict[str, Capabilities] = {"galera": _IN_USE(_GALERA)}
"""Rows for an engine the probe finds behind a dialect (``_probe.cluster_of``)."""

CAPABILITIES: dict[str, Capabilities] = {name: _IN_USE(row) for name, row in _NATIVE.items()}
"""Each known dialect's row, in the process's profile."""


def capabilities(dialect: Dialect | str, *, cluster: str | None = None) -> Capabilities:
    """The capabilities of ``dialect`` (a Dialect, or a dialect's name; one agentledger
    was not tested on gets the portable ``_UNTESTED`` row), or of the ``cluster`` the
    probe found behind it (``CLUSTERS``)."""
    name = dialect if isinstance(dialect, str) else dialect.name
    if cluster is None:
        return CAPABILITIES.get(name) or _ON_PAPER.get(name, _UNTESTED)
    try:
        return CLUSTERS[cluster]
    except KeyError:
        raise ValueError(f"agentledger does not know the cluster {cluster!r}") from None


def tested(dialect: Dialect | str) -> bool:
    """Whether agentledger's own suite runs on ``dialect`` (SQLite, PostgreSQL,
    MariaDB/MySQL); any other runs on the portable profile after its probe."""
    return (dialect if isinstance(dialect, str) else dialect.name) in _NATIVE


def dialect_names(wanted: Callable[[Capabilities], bool]) -> tuple[str, ...]:
    """The names of the dialects (tested, or compiled on paper) whose capabilities are
    ``wanted`` (for SQLAlchemy options keyed by dialect name, such as ``with_hint``)."""
    rows = {**CAPABILITIES, **_ON_PAPER}
    return tuple(name for name, found in rows.items() if wanted(found))


_LOCK_HINTS = tuple(
    (name, hints)
    for name in dialect_names(lambda found: found.lock_hints is not None)
    if (hints := capabilities(name).lock_hints) is not None
)
"""(dialect name, its ``LockHints``) of each dialect that locks through table hints."""

LockedSelect = TypeVar("LockedSelect", bound=Select[Any])


def locking(query: LockedSelect, *, read: bool = False, key_share: bool = False) -> LockedSelect:
    """``query`` as a locking read: ``FOR UPDATE``, or ``FOR SHARE`` with ``read``
    (``FOR KEY SHARE`` with ``key_share`` too), and on a database that locks through
    table hints (``Capabilities.lock_hints``: SQL Server) the hint taking the same lock
    on each table it reads from. Each hint is keyed by its dialect's name, so a
    statement built once at import locks on every dialect, and compiles elsewhere as
    ``with_for_update`` alone would."""
    locked = query.with_for_update(read=read, key_share=key_share)
    for name, hints in _LOCK_HINTS:
        hint = hints.share if read else hints.update
        for table in _surface_tables(query.get_final_froms()):
            locked = locked.with_hint(table, hint, name)
    return locked


def _surface_tables(froms: Iterable[FromClause]) -> Iterator[TableClause]:
    """The tables of ``froms`` a locking read locks rows of: those joined, not those
    of a subquery."""
    for found in froms:
        if isinstance(found, Join):
            yield from _surface_tables((found.left, found.right))
        elif isinstance(found, TableClause):
            yield found
