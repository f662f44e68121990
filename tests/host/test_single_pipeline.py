"""The opt-in single pipeline: a host mounts agentledger's versions in its own Alembic
tree and runs `alembic upgrade heads`; the host's revision depends on ours.

The host is docs/examples/single_pipeline. From the source tree (an editable install)
the package resource ``agentledger:_migrations/versions`` does not exist, so these
tests point version_locations at the source tree's versions folder instead; the wheel
test (tests/migrations/test_wheel.py) runs the same project verbatim.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.config import Config
from sqlalchemy import column, create_engine, delete, insert, select, table
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import Ledger, SchemaError, migrations
from agentledger.cli import EXIT_OK, main
from agentledger.models import VERSION_TABLE

from ..databases import dialect_params, scratch_database
from ..migrations._support import OUR_TABLES, drift
from ._support import SINGLE_PIPELINE, run, table_names, url_text, versions

pytestmark = pytest.mark.slow  # a host project migrated through Alembic on each database
RESOURCE = "agentledger:_migrations/versions"
HEAD = migrations.head()


def host_project(where: Path, mount: str, *, separator: str = "space") -> Path:
    """A copy of the host project with version_locations set to ``mount`` (``HOST``
    stands for the host's own versions folder)."""
    project = where / "host"
    shutil.copytree(SINGLE_PIPELINE, project, ignore=shutil.ignore_patterns("__pycache__"))
    ini = project / "alembic.ini"
    text = ini.read_text()
    shipped = f"%(here)s/migrations/versions {RESOURCE}"
    assert shipped in text and "path_separator = space" in text
    text = text.replace(shipped, mount.replace("HOST", "%(here)s/migrations/versions"))
    ini.write_text(text.replace("path_separator = space", f"path_separator = {separator}"))
    return project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return host_project(tmp_path, f"HOST {migrations.versions_location()}")


@pytest.fixture(params=dialect_params())
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[URL]:
    with scratch_database(request.param, str(tmp_path)) as url:
        yield url


def upgrade_heads(project: Path, url: URL, *, check: bool = True) -> str:
    argv = ("alembic", "-c", "alembic.ini", "upgrade", "heads")
    done = run(*argv, url=url, cwd=project, check=check)
    return done.stdout + done.stderr


def test_upgrade_heads_runs_both_trees_into_the_hosts_version_table(
    project: Path, database: URL
) -> None:
    upgrade_heads(project, database)

    assert versions(database, "alembic_version") == {"host_0001", HEAD}
    assert VERSION_TABLE not in table_names(database)
    assert table_names(database) >= OUR_TABLES | {"helpdesk_tickets"}
    assert drift(database) == []
    assert migrations.current(database) == HEAD
    migrations.check(database)  # the ledger's start-up check reads the host's table


def test_the_ledger_and_the_hosts_foreign_key_work(project: Path, database: URL) -> None:
    upgrade_heads(project, database)
    tickets = table("helpdesk_tickets", column("id"), column("session_id"), column("subject"))

    with Ledger(database) as ledger:
        ledger.sessions.create("chat-1")
        with ledger.engine.begin() as connection:
            connection.execute(insert(tickets).values(id=1, session_id="chat-1", subject="refund"))
        ledger.sessions.delete("chat-1")
        with ledger.engine.connect() as connection:
            assert connection.execute(select(tickets.c.id)).all() == []  # ON DELETE CASCADE


def test_the_hosts_alembic_check_proposes_nothing(project: Path, database: URL) -> None:
    upgrade_heads(project, database)
    done = run("alembic", "-c", "alembic.ini", "check", url=database, cwd=project)
    assert "No new upgrade operations detected" in done.stdout + done.stderr


def test_our_own_upgrade_refuses_and_says_how_to_recover(
    project: Path, database: URL, capsys: pytest.CaptureFixture[str]
) -> None:
    upgrade_heads(project, database)

    with pytest.raises(SchemaError, match="recorded in the table alembic_version") as caught:
        migrations.upgrade(database)
    assert caught.value.hint is not None
    assert "alembic upgrade heads" in caught.value.hint
    assert f"agentledger db stamp {HEAD}" in caught.value.hint
    assert VERSION_TABLE not in table_names(database)

    assert main(["db", "upgrade", "--url", url_text(database)]) != EXIT_OK
    assert "single pipeline" in capsys.readouterr().err


def test_recovering_to_a_separate_stream_with_stamp(
    project: Path, database: URL, capsys: pytest.CaptureFixture[str]
) -> None:
    upgrade_heads(project, database)
    engine = create_engine(database, poolclass=NullPool)
    version = table("alembic_version", column("version_num"))
    with engine.begin() as connection:
        connection.execute(delete(version).where(version.c.version_num == HEAD))
    engine.dispose()

    assert main(["db", "stamp", "--url", url_text(database), HEAD]) == EXIT_OK

    assert versions(database, VERSION_TABLE) == {HEAD}
    assert versions(database, "alembic_version") == {"host_0001"}
    migrations.upgrade(database)  # a no-op now
    migrations.check(database)


def test_mixing_the_modes_the_other_way_is_refused_by_the_hosts_env(
    project: Path, database: URL
) -> None:
    migrations.upgrade(database)  # agentledger's own stream came first

    out = upgrade_heads(project, database, check=False)

    assert "agentledger's own stream manages this database" in out
    assert "helpdesk_tickets" not in table_names(database)
    assert versions(database, "alembic_version") == set()


@pytest.mark.postgresql
def test_the_schema_option_is_refused_in_this_mode(project: Path, tmp_path: Path) -> None:
    with scratch_database("postgresql", str(tmp_path)) as url:
        upgrade_heads(project, url)

        with pytest.raises(SchemaError, match=r"not available .*single pipeline"):
            migrations.upgrade(url, schema="agents")
        with pytest.raises(SchemaError, match=r"not available .*single pipeline"):
            migrations.check(url, schema="agents")
        with Ledger(url, schema="agents") as ledger, pytest.raises(SchemaError):
            ledger.sessions.exists("x")
        assert VERSION_TABLE not in table_names(url)


def _config(project: Path) -> Config:
    return Config(str(project / "alembic.ini"))


def test_check_host_config_accepts_the_mounted_versions(project: Path) -> None:
    migrations.check_host_config(_config(project))


def test_check_host_config_refuses_path_separator_os(tmp_path: Path) -> None:
    # The os separator is ':' on POSIX, so entries are joined with ':' too.
    project = host_project(tmp_path, f"HOST:{RESOURCE}", separator="os")

    with pytest.raises(SchemaError, match="path_separator = os") as caught:
        migrations.check_host_config(_config(project))
    assert caught.value.hint is not None and "path_separator = space" in caught.value.hint


def test_check_host_config_refuses_a_host_without_our_versions(tmp_path: Path) -> None:
    project = host_project(tmp_path, "HOST")

    with pytest.raises(SchemaError, match="does not include agentledger's revisions"):
        migrations.check_host_config(_config(project))


def test_check_host_config_refuses_the_schema_option(project: Path) -> None:
    config = _config(project)
    config.attributes[migrations.SCHEMA_ATTRIBUTE] = "agents"

    with pytest.raises(SchemaError, match="schema option is not available"):
        migrations.check_host_config(config)


def test_moving_from_our_stream_to_the_single_pipeline(project: Path, database: URL) -> None:
    migrations.upgrade(database)
    refused = upgrade_heads(project, database, check=False)
    assert f"drop the table {VERSION_TABLE}, then `alembic stamp {HEAD}`" in refused

    engine = create_engine(database, poolclass=NullPool)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE {VERSION_TABLE}")
    engine.dispose()
    run("alembic", "-c", "alembic.ini", "stamp", HEAD, url=database, cwd=project)
    upgrade_heads(project, database)

    assert versions(database, "alembic_version") == {"host_0001", HEAD}
    migrations.check(database)
    assert drift(database) == []


def test_check_host_config_names_the_path_to_use_from_a_checkout(tmp_path: Path) -> None:
    # An editable install has no agentledger/_migrations resource: the message says
    # where the revisions are instead.
    project = host_project(tmp_path, f"HOST {RESOURCE}")

    with pytest.raises(SchemaError, match="does not exist in this installation") as caught:
        migrations.check_host_config(_config(project))
    assert str(migrations.versions_location()) in str(caught.value)
