# ruff: noqa: S608 - the SQL below is assembled from this module's constants and ints only
"""The benchmark's own databases: created fresh, migrated, and seeded in bulk.

Seeding is untimed and server-side: one ``INSERT ... SELECT`` over a number series per
table (PostgreSQL ``generate_series``, MariaDB's ``seq_1_to_N`` sequence table, a
recursive CTE on SQLite), so 100,000 sessions or 1,000,000 steps take seconds.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

from agentledger import migrations

from .raw import to_db_time

DEFAULT_URLS = {
    "postgresql": "postgresql://postgres@127.0.0.1:5432/agentledger_bench",
    "mysql": "mysql://root@127.0.0.1:3306/agentledger_bench",
}
URL_ENV = {
    "postgresql": "AGENTLEDGER_BENCH_POSTGRES_URL",
    "mysql": "AGENTLEDGER_BENCH_MYSQL_URL",
}
SEED_TIME = datetime(2026, 1, 1, tzinfo=UTC)
MESSAGE_TEXT = (
    "The quick brown fox jumps over the lazy dog while the agent plans its next tool call. " * 4
)[:300]
SEED_CONTENT = json.dumps({"parts": [{"type": "text", "text": MESSAGE_TEXT}]})
STEP_INPUT = json.dumps({"messages": [{"role": "user", "content": "What is the weather?"}]})
STEP_OUTPUT = json.dumps({"text": "Sunny, 21 degrees.", "finish_reason": "stop"})


def server_url(dialect: str, given: str | None) -> URL:
    """The benchmark database of ``dialect``: the flag, else the env var, else the default."""
    return make_url(given or os.environ.get(URL_ENV[dialect]) or DEFAULT_URLS[dialect])


def sync_url(dialect: str, url: URL) -> URL:
    driver = {"sqlite": "pysqlite", "postgresql": "psycopg", "mysql": "pymysql"}[dialect]
    return url.set(drivername=f"{url.get_backend_name()}+{driver}")


def recreate_database(dialect: str, url: URL) -> None:
    """Drop and create the benchmark's own database (or SQLite file)."""
    if dialect == "sqlite":
        assert url.database is not None
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(url.database + suffix):
                os.remove(url.database + suffix)
        return
    admin = url.set(database="postgres") if dialect == "postgresql" else url._replace(database=None)
    engine = create_engine(
        sync_url(dialect, admin), poolclass=NullPool, isolation_level="AUTOCOMMIT"
    )
    name = url.database
    assert name is not None and name.replace("_", "").isalnum(), name
    with engine.connect() as connection:
        if dialect == "postgresql":
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        else:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
            connection.exec_driver_sql(f"CREATE DATABASE `{name}`")
    engine.dispose()


def migrate(dialect: str, url: URL) -> None:
    migrations.upgrade(sync_url(dialect, url))


def _series(dialect: str, count: int) -> str:
    """A FROM item with one column ``n`` running 1..count (count is our own int)."""
    count = int(count)
    if dialect == "postgresql":
        return f"generate_series(1, {count}) AS s(n)"
    if dialect == "mysql":
        return f"(SELECT seq AS n FROM seq_1_to_{count}) AS s"
    return (
        "(WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c "
        f"WHERE n < {count}) SELECT n FROM c) AS s"
    )


def _json(dialect: str, param: str, kind: str = "JSON") -> str:
    return f"CAST(:{param} AS {kind})" if dialect == "postgresql" else f":{param}"


class Seeder:
    """Bulk inserts on a sync connection of the benchmark database."""

    def __init__(self, dialect: str, url: URL) -> None:
        self.dialect = dialect
        self.engine = create_engine(sync_url(dialect, url), poolclass=NullPool)

    def close(self) -> None:
        self.engine.dispose()

    def _run(self, connection: Connection, sql: str, **params: Any) -> None:
        connection.execute(text(sql), params)

    def listing_sessions(self, count: int) -> None:
        """``count`` sessions ``list-0000001``... updated a second apart (the listing)."""
        d = self.dialect
        if d == "postgresql":
            ident = "'list-' || lpad(n::text, 7, '0')"
            title = "'Conversation ' || n"
            updated = "CAST(:t0 AS TIMESTAMPTZ) + n * INTERVAL '1 second'"
        elif d == "mysql":
            ident = "CONCAT('list-', LPAD(n, 7, '0'))"
            title = "CONCAT('Conversation ', n)"
            updated = "TIMESTAMPADD(SECOND, n, :t0)"
        else:
            ident = "'list-' || printf('%07d', n)"
            title = "'Conversation ' || n"
            updated = "strftime('%Y-%m-%d %H:%M:%S', :t0, '+' || n || ' seconds') || '.000000'"
        t0: Any = to_db_time(d, SEED_TIME)
        if d == "sqlite":
            t0 = SEED_TIME.strftime("%Y-%m-%d %H:%M:%S")
        sql = (
            "INSERT INTO agentledger_sessions (id, app_name, user_id, title, model, status, "
            "state, message_count, message_seq, step_count, checkpoint_seq, input_tokens, "
            "output_tokens, total_tokens, last_run, latest_checkpoint_ref, preview, "
            f"created_at, updated_at, revision) SELECT {ident}, NULL, NULL, {title}, "
            f"'bench-model', 'active', {_json(d, 'state', 'JSONB')}, 0, 0, 0, 0, 0, 0, 0, "
            f"NULL, NULL, NULL, :created, {updated}, 1 FROM {_series(d, count)}"
        )
        with self.engine.begin() as connection:
            self._run(connection, sql, state="{}", created=to_db_time(d, SEED_TIME), t0=t0)

    def messages(self, session_id: str, count: int) -> None:
        """``count`` messages of about 340 bytes of JSON each, roles alternating."""
        d = self.dialect
        sql = (
            "INSERT INTO agentledger_messages (session_id, seq, role, content, metadata, "
            "created_at) SELECT :sid, n, CASE WHEN MOD(n, 2) = 1 THEN 'user' ELSE 'assistant' "
            f"END, {_json(d, 'content')}, {_json(d, 'meta')}, :created FROM {_series(d, count)}"
        )
        if d == "sqlite":  # no MOD() before 3.35 builds with math functions
            sql = sql.replace("MOD(n, 2)", "(n % 2)")
        if d == "mysql":  # `role` is a keyword on MariaDB
            sql = sql.replace(", role,", ", `role`,")
        update = (
            "UPDATE agentledger_sessions SET message_count = :count, message_seq = :count "
            "WHERE id = :sid"
        )
        with self.engine.begin() as connection:
            self._run(
                connection,
                sql,
                sid=session_id,
                content=SEED_CONTENT,
                meta="{}",
                created=to_db_time(d, SEED_TIME),
            )
            self._run(connection, update, count=count, sid=session_id)

    def steps(self, session_id: str, count: int) -> None:
        """``count`` small model-call steps (about 150 bytes of JSON each)."""
        d = self.dialect
        sql = (
            "INSERT INTO agentledger_steps (session_id, seq, step_index, run_id, kind, name, "
            "model, input, output, tool_calls, input_tokens, output_tokens, total_tokens, "
            "usage_extra, started_at, ended_at, error) SELECT :sid, n, n, NULL, 'model', NULL, "
            f"'bench-model', {_json(d, 'input')}, {_json(d, 'output')}, NULL, 10, 20, 30, NULL, "
            f":started, NULL, NULL FROM {_series(d, count)}"
        )
        update = (
            "UPDATE agentledger_sessions SET step_count = :count, input_tokens = :i, "
            "output_tokens = :o, total_tokens = :t WHERE id = :sid"
        )
        with self.engine.begin() as connection:
            self._run(
                connection,
                sql,
                sid=session_id,
                input=STEP_INPUT,
                output=STEP_OUTPUT,
                started=to_db_time(d, SEED_TIME),
            )
            self._run(
                connection, update, count=count, i=10 * count, o=20 * count, t=30 * count,
                sid=session_id,
            )  # fmt: skip

    def analyze(self) -> None:
        """Fresh planner statistics after the bulk load, as a deploy would have."""
        with self.engine.connect() as connection:
            if self.dialect == "postgresql":
                connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM ANALYZE"
                )
            elif self.dialect == "mysql":
                for table in ("sessions", "messages", "steps", "checkpoints"):
                    connection.exec_driver_sql(f"ANALYZE TABLE agentledger_{table}").all()
            else:
                connection.exec_driver_sql("ANALYZE")
                connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").all()
            if connection.in_transaction():
                connection.commit()


def bytes_per_row(dialect: str, url: URL, table: str) -> float:
    """MariaDB/MySQL: the table's size with its indexes over its row count.

    InnoDB allocates a growing table in 1 MiB extents and reports sizes in whole
    extents, so the growth over a few thousand appends is often 0; the average over
    the whole table (all messages alike here) is what it can tell.
    """
    engine = create_engine(sync_url(dialect, url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(f"ANALYZE TABLE {table}").all()
            query = (
                "SELECT data_length + index_length FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = :t"
            )
            size = int(connection.execute(text(query), {"t": table}).scalar_one())
            rows = int(connection.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar_one())
            return size / max(rows, 1)
    finally:
        engine.dispose()


def stored_bytes(dialect: str, url: URL, table: str) -> int:
    """Bytes the table and its indexes take in the database (pages, as allocated)."""
    engine = create_engine(sync_url(dialect, url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            if dialect == "postgresql":
                query = "SELECT pg_total_relation_size(CAST(:t AS regclass))"
                return int(connection.execute(text(query), {"t": table}).scalar_one())
            if dialect == "mysql":
                connection.exec_driver_sql(f"ANALYZE TABLE {table}").all()
                query = (
                    "SELECT data_length + index_length FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name = :t"
                )
                return int(connection.execute(text(query), {"t": table}).scalar_one())
            query = (
                "SELECT SUM(pgsize) FROM dbstat WHERE name IN "
                "(SELECT name FROM sqlite_master WHERE tbl_name = :t)"
            )
            return int(connection.execute(text(query), {"t": table}).scalar_one() or 0)
    finally:
        engine.dispose()
