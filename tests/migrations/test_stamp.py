"""Adopting tables made without migrations (create_all): `stamp` checks the shape first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, MetaData, String, create_engine, event, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.cli import EXIT_OK, EXIT_SCHEMA, main
from agentledger.errors import SchemaError, ValidationError
from agentledger.migrations.compare import copied_metadata
from agentledger.models import VERSION_TABLE, metadata

from ..databases import scratch_database
from ._support import drift, our_table_names

NEW_INDEX = "ix_agentledger_steps_started_at_model"


def _copy(
    edit: Callable[[MetaData], None] = lambda _: None, *, schema: str | None = None
) -> MetaData:
    copy = copied_metadata(schema)
    edit(copy)
    return copy


def _tables_of_release_0001(url: URL) -> None:
    """The tables an older release (revision 0001) made, with no version stamped: as
    its ``create_all`` would have left them."""
    migrations.upgrade(url, "agentledger_0001")
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text(f"DROP TABLE {VERSION_TABLE}"))
    finally:
        engine.dispose()


def _create_all(url: URL, tables: MetaData) -> None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            tables.create_all(connection)
    finally:
        engine.dispose()


def _ddl_of_upgrade(url: URL) -> list[str]:
    engine = create_engine(url, poolclass=NullPool)
    seen: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def record(_c: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("CREATE", "ALTER", "DROP")):
            seen.append(statement)

    try:
        migrations.upgrade(engine)
    finally:
        engine.dispose()
    return seen


def test_tables_made_by_create_all_are_adopted_at_head(scratch_url: URL) -> None:
    _create_all(scratch_url, metadata)

    migrations.stamp(scratch_url)

    assert migrations.current(scratch_url) == migrations.head()
    migrations.check(scratch_url)
    assert _ddl_of_upgrade(scratch_url) == []
    assert drift(scratch_url) == []


def test_tables_of_an_older_release_name_the_difference_and_the_revision(
    scratch_url: URL,
) -> None:
    _tables_of_release_0001(scratch_url)

    with pytest.raises(SchemaError) as caught:
        migrations.stamp(scratch_url)

    message = str(caught.value)
    assert f"index {NEW_INDEX} on agentledger_steps is missing" in message
    assert caught.value.hint is not None
    assert caught.value.hint.startswith(
        "they match revision agentledger_0001: agentledger db stamp agentledger_0001 --url "
    )
    assert migrations.current(scratch_url) is None

    migrations.stamp(scratch_url, "agentledger_0001")
    migrations.upgrade(scratch_url)

    assert migrations.current(scratch_url) == migrations.head()
    assert drift(scratch_url) == []


def test_a_shape_that_matches_no_revision_is_refused_naming_each_difference(
    scratch_url: URL,
) -> None:
    def damage(copy: MetaData) -> None:
        copy.remove(copy.tables["agentledger_grants"])
        copy.tables["agentledger_sessions"].c.title.type = String(100)

    _create_all(scratch_url, _copy(damage))

    with pytest.raises(SchemaError) as caught:
        migrations.stamp(scratch_url)

    message = str(caught.value)
    assert "table agentledger_grants is missing" in message
    title = "column agentledger_sessions.title has type VARCHAR(100), expected VARCHAR(512)"
    assert title in message
    assert caught.value.hint is not None and "make the tables match" in caught.value.hint
    assert migrations.current(scratch_url) is None


def test_stamping_an_empty_database_points_to_upgrade(scratch_url: URL) -> None:
    with pytest.raises(SchemaError, match="table agentledger_sessions is missing") as caught:
        migrations.stamp(scratch_url)
    assert caught.value.hint is not None and caught.value.hint.startswith("agentledger db upgrade")
    assert our_table_names(scratch_url) == set()


@pytest.mark.sqlite
def test_stamping_a_migrated_database_again_is_a_no_op_and_elsewhere_refused(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    migrations.upgrade(url)
    migrations.stamp(url)  # already there

    migrations.downgrade(url, "agentledger_0001")
    with pytest.raises(SchemaError, match="already at agentledger revision agentledger_0001"):
        migrations.stamp(url)


@pytest.mark.sqlite
def test_stamping_an_unknown_revision_is_a_validation_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="agentledger_9999"):
        migrations.stamp(f"sqlite:///{tmp_path / 'x.db'}", "agentledger_9999")


@pytest.mark.sqlite
def test_db_stamp_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    _tables_of_release_0001(URL.create("sqlite", database=str(tmp_path / "x.db")))

    assert main(["db", "stamp", "--url", url]) == EXIT_SCHEMA
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and NEW_INDEX in err
    assert "agentledger db stamp agentledger_0001" in err

    assert main(["db", "stamp", "--url", url, "agentledger_0001"]) == EXIT_OK
    assert "is at agentledger_0001" in capsys.readouterr().out
    assert main(["db", "upgrade", "--url", url]) == EXIT_OK


@pytest.mark.postgresql
def test_stamp_in_a_postgresql_schema(tmp_path: Path) -> None:
    with scratch_database("postgresql", str(tmp_path)) as url:
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE SCHEMA agents")
        engine.dispose()
        _create_all(url, _copy(schema="agents"))

        migrations.stamp(url, schema="agents")

        migrations.check(url, schema="agents")
        assert VERSION_TABLE in our_table_names(url, schema="agents")
        assert our_table_names(url) == set()
