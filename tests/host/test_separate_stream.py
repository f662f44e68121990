"""The default: a host with its own Alembic environment beside agentledger's stream.

The host is examples/host_app. Its deploy step runs its own `alembic upgrade head`
and `agentledger db upgrade`; each keeps its own version table, and the host's
autogenerate, with our filters in its env.py, proposes nothing about our tables.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, create_engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.models import VERSION_TABLE, WORDS_TABLE
from agentledger.models import metadata as agentledger_metadata

from ..databases import dialect_params, scratch_database
from ..migrations._support import OUR_TABLES, drift
from ._support import HOST_APP, run, table_names, versions

pytestmark = pytest.mark.slow  # a host project migrated through Alembic on each database
HOST_TABLES = {"users", "orders", "alembic_version"}


def host_metadata() -> MetaData:
    sys.path.insert(0, str(HOST_APP))
    try:
        from shop.models import Base
    finally:
        sys.path.remove(str(HOST_APP))
    return Base.metadata


@pytest.fixture(scope="module", params=dialect_params())
def deployed(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[URL]:
    """A database after the host's deploy step (both streams), shared by read-only tests."""
    with scratch_database(request.param, str(tmp_path_factory.mktemp("host"))) as url:
        run(HOST_APP / "deploy.sh", url=url, cwd=HOST_APP)
        yield url


def test_each_stream_keeps_its_own_version_table(deployed: URL) -> None:
    assert versions(deployed, "alembic_version") == {"shop_0001"}
    assert versions(deployed, VERSION_TABLE) == {migrations.head()}
    assert table_names(deployed) >= HOST_TABLES | OUR_TABLES | {VERSION_TABLE}
    assert drift(deployed) == []


def test_the_hosts_alembic_check_finds_nothing_to_do(deployed: URL) -> None:
    done = run("alembic", "-c", "alembic.ini", "check", url=deployed, cwd=HOST_APP)
    assert "No new upgrade operations detected" in done.stdout + done.stderr


def _host_diffs(url: URL, target: Any, **filters: Any) -> list[Any]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            opts = {"target_metadata": target, "compare_type": True, **filters}
            return list(compare_metadata(MigrationContext.configure(connection, opts=opts), target))
    finally:
        engine.dispose()


def _names(diffs: list[Any]) -> set[str]:
    return {diff[1].name for diff in diffs if diff[0] in ("remove_table", "add_table")}


def test_without_the_filter_the_hosts_autogenerate_would_drop_our_tables(deployed: URL) -> None:
    diffs = _host_diffs(deployed, host_metadata())
    assert {d[0] for d in diffs} == {"remove_table", "remove_index"}
    # SQLite's FTS5 table of memory items' words and its shadow tables are ours too.
    words = {name for name in table_names(deployed) if name.startswith(WORDS_TABLE)}
    assert _names(diffs) == OUR_TABLES | {VERSION_TABLE} | words


def test_with_the_filter_the_hosts_autogenerate_proposes_nothing(deployed: URL) -> None:
    diffs = _host_diffs(
        deployed, host_metadata(), include_name=migrations.exclude_agentledger_names
    )
    assert diffs == []


# Without the object filter, autogenerate also meets PostgreSQL's tsvector index among
# our models and, on SQLite, says it cannot compare it: part of what the filter is for.
@pytest.mark.filterwarnings(
    "ignore:autogenerate skipping metadata-specified expression-based index:UserWarning"
)
def test_our_metadata_in_the_hosts_target_needs_the_object_filter(deployed: URL) -> None:
    target = [host_metadata(), agentledger_metadata]
    names_only = _host_diffs(deployed, target, include_name=migrations.exclude_agentledger_names)
    assert _names(names_only) == OUR_TABLES  # it would propose to create them again

    both = _host_diffs(
        deployed,
        target,
        include_name=migrations.exclude_agentledger_names,
        include_object=migrations.exclude_agentledger_objects,
    )
    assert both == []


def test_running_the_deploy_step_again_changes_nothing(deployed: URL) -> None:
    done = run(HOST_APP / "deploy.sh", url=deployed, cwd=HOST_APP)
    assert done.stdout.count(f"is at {migrations.head()} (head)") == 2  # upgrade, check
    assert "Running upgrade" not in done.stderr
    assert versions(deployed, "alembic_version") == {"shop_0001"}
    assert versions(deployed, VERSION_TABLE) == {migrations.head()}


@pytest.mark.parametrize("dialect", dialect_params())
def test_the_hosts_downgrade_leaves_our_tables_alone(dialect: str, tmp_path: Path) -> None:
    with scratch_database(dialect, str(tmp_path)) as url:
        run(HOST_APP / "deploy.sh", url=url, cwd=HOST_APP)

        run("alembic", "-c", "alembic.ini", "downgrade", "base", url=url, cwd=HOST_APP)

        assert not {"users", "orders"} & table_names(url)
        migrations.check(url)
        assert drift(url) == []
