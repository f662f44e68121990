"""The obvious queries use the indexes: checked with EXPLAIN on PostgreSQL and MariaDB.

Each test is marked with the one server it needs (and skips, saying so, without it).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Select, create_engine, insert, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger.models import AgentSession
from agentledger.repositories.sessions import _listing

from ..databases import migrated, scratch_database

SESSIONS = 20_000


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[URL]:
    with scratch_database("postgresql", str(tmp_path_factory.mktemp("plans"))) as url:
        migrated(url)
        start = datetime(2026, 1, 1, tzinfo=UTC)
        rows = [
            {
                "id": f"s{index:06d}",
                "app_name": f"app{index % 5}",
                "user_id": f"user{index % 200}",
                "status": "active" if index % 3 else "completed",
                "state": {},
                "message_count": 0,
                "message_seq": 0,
                "step_count": 0,
                "checkpoint_seq": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "total_tokens": 0,
                "created_at": start,
                "updated_at": start + timedelta(seconds=index),
                "revision": 1,
            }
            for index in range(SESSIONS)
        ]
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as connection:
            connection.execute(insert(AgentSession), rows)
            connection.exec_driver_sql("ANALYZE agentledger_sessions")
        yield url
        engine.dispose()


def _deep_page(
    filters: tuple[str | None, str | None, str | None], *, at: int = SESSIONS // 2
) -> Select[Any]:
    """The listing statement the repository runs for a page after the session ``at``."""
    deep = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=at)
    query = _listing(*(value is not None for value in filters), after=True)
    values = dict(zip(("app_name", "user_id", "status"), filters, strict=True))
    values = {name: value for name, value in values.items() if value is not None}
    return query.params(after_updated_at=deep, after_id="s999999", n=51, **values)


def plan(url: URL, query: object) -> str:
    sql = query.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})  # type: ignore[attr-defined]
    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as connection:
        lines = connection.exec_driver_sql(f"EXPLAIN {sql}").scalars().all()
    engine.dispose()
    return "\n".join(lines)


@pytest.mark.postgresql
@pytest.mark.parametrize(
    "filters",
    [
        (None, None, None),
        ("app3", None, None),
        (None, "user42", None),
        (None, None, "completed"),
        ("app2", "user42", "active"),
    ],
    ids=["all", "app", "user", "status", "combined"],
)
def test_a_deep_listing_page_reads_through_an_index_never_the_whole_table(
    populated: URL, filters: tuple[str | None, str | None, str | None]
) -> None:
    explained = plan(populated, _deep_page(filters))
    assert "Seq Scan" not in explained, explained
    assert "ix_agentledger_sessions_" in explained, explained
    # The planner picks the index that fits the filter's selectivity; either way it
    # stops after the page (a LIMIT over an index scan) or sorts only the matching rows.
    assert "rows=51" in explained.splitlines()[0] or "Sort" in explained, explained


@pytest.mark.mysql
def test_a_deep_listing_page_is_an_index_range_on_mariadb(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """MariaDB plans a row-value comparison ``(updated_at, id) < (...)`` as a scan of the
    whole index; the listing's keyset predicate must stay a range."""
    with scratch_database("mysql", str(tmp_path_factory.mktemp("plans"))) as url:
        migrated(url)
        start = datetime(2026, 1, 1, tzinfo=UTC)
        rows = [_row(index, start) for index in range(SESSIONS)]
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.begin() as connection:
                connection.execute(insert(AgentSession), rows)
                connection.exec_driver_sql("ANALYZE TABLE agentledger_sessions").all()
            # 90% of the way down the listing: one page left of what it reads.
            sql = _deep_page((None, None, None), at=SESSIONS // 10).compile(
                dialect=engine.dialect, compile_kwargs={"literal_binds": True}
            )
            with engine.connect() as connection:
                found = connection.execute(text(f"EXPLAIN {sql}")).mappings().one()
        finally:
            engine.dispose()
    assert found["type"] == "range", dict(found)
    assert found["key"] == "ix_agentledger_sessions_updated_at_id", dict(found)


def _row(index: int, start: datetime) -> dict[str, Any]:
    return {
        "id": f"s{index:06d}",
        "status": "active",
        "state": {},
        "message_count": 0,
        "message_seq": 0,
        "step_count": 0,
        "checkpoint_seq": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 0,
        "created_at": start,
        "updated_at": start + timedelta(seconds=index),
        "revision": 1,
    }
