"""Building a ledger: URLs and drivers, engines it owns or borrows, the schema check."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.ext.asyncio import create_async_engine

from agentledger import (
    AsyncLedger,
    AsyncUnitOfWork,
    ConflictError,
    DatabaseError,
    DatabaseUnavailableError,
    Ledger,
    SchemaError,
    UnitOfWork,
    UsageError,
    ValidationError,
    migrations,
)
from agentledger.engine import resolve_url


@pytest.mark.parametrize(
    ("url", "sync_driver", "async_driver"),
    [
        ("sqlite:///x.db", "sqlite+pysqlite", "sqlite+aiosqlite"),
        ("postgresql://u@h/db", "postgresql+psycopg", "postgresql+asyncpg"),
        ("postgres://u@h/db", "postgresql+psycopg", "postgresql+asyncpg"),
        ("mysql://u@h/db", "mysql+pymysql", "mysql+aiomysql"),
        ("mariadb://u@h/db", "mariadb+pymysql", "mariadb+aiomysql"),
    ],
)
def test_a_plain_url_picks_the_driver_for_each_api(
    url: str, sync_driver: str, async_driver: str
) -> None:
    assert resolve_url(url, asynchronous=False).drivername == sync_driver
    assert resolve_url(url, asynchronous=True).drivername == async_driver


@pytest.mark.parametrize(
    ("url", "asynchronous", "expected"),
    [
        ("sqlite+pysqlite:///x.db", True, "sqlite+aiosqlite"),
        ("sqlite+aiosqlite:///x.db", False, "sqlite+pysqlite"),
        ("postgresql+asyncpg://h/db", False, "postgresql+psycopg"),
        ("postgresql+psycopg://h/db", True, "postgresql+psycopg_async"),
        ("mysql+pymysql://h/db", True, "mysql+aiomysql"),
        ("mysql+aiomysql://h/db", False, "mysql+pymysql"),
    ],
)
def test_a_driver_of_the_other_api_is_swapped_for_its_twin(
    url: str, asynchronous: bool, expected: str
) -> None:
    assert resolve_url(url, asynchronous=asynchronous).drivername == expected


@pytest.mark.parametrize("url", ["not a url", "nonsense://u@h/db", "://nothing"])
def test_a_bad_or_unsupported_url_is_a_validation_error(url: str) -> None:
    with pytest.raises(ValidationError):
        Ledger(url)


def test_a_missing_driver_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pg8000", None)  # as if it were not installed
    with pytest.raises(DatabaseError) as raised:
        Ledger("postgresql+pg8000://u@h/db")
    assert "pip install" in str(raised.value)


def test_with_no_url_the_environment_variable_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTLEDGER_DATABASE_URL", f"sqlite:///{tmp_path}/from-env.db")
    with Ledger() as ledger:
        assert ledger.engine.url.database == f"{tmp_path}/from-env.db"


def test_with_nothing_given_a_local_sqlite_file_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AGENTLEDGER_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with Ledger() as ledger:
        ledger.upgrade()
        ledger.sessions.create("here")
    assert (tmp_path / "agentledger.db").is_file()


def test_a_missing_schema_raises_schema_error_naming_the_upgrade(tmp_path: Path) -> None:
    with Ledger(f"sqlite:///{tmp_path}/empty.db") as ledger:
        with pytest.raises(SchemaError) as raised:
            ledger.sessions.exists("x")
        assert "agentledger db upgrade" in str(raised.value)
        ledger.upgrade()
        assert ledger.sessions.exists("x") is False


async def test_a_schema_behind_raises_schema_error_on_the_async_api(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/behind.db"
    migrations.upgrade(url)
    migrations.downgrade(url, "base")
    async with AsyncLedger(url) as ledger:
        with pytest.raises(SchemaError):
            await ledger.sessions.exists("x")
        await ledger.upgrade()
        assert await ledger.sessions.exists("x") is False


def test_a_borrowed_engine_is_not_disposed(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/borrowed.db")
    migrations.upgrade(engine)
    disposed = []
    event.listen(engine.pool, "close", lambda *_: disposed.append(1))
    from agentledger import configure_sqlite_engine

    configure_sqlite_engine(engine)
    with Ledger(engine=engine) as ledger:
        ledger.sessions.create("kept")
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM agentledger_sessions").scalar() == 1
    engine.dispose()


def test_a_borrowed_sqlite_engine_without_foreign_keys_is_refused(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/plain.db")
    migrations.upgrade(engine)
    with Ledger(engine=engine) as ledger, pytest.raises(SchemaError) as raised:
        ledger.sessions.create("x")
    assert "configure_sqlite_engine" in str(raised.value)
    engine.dispose()


def test_an_engine_of_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    async_engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/a.db")
    with pytest.raises(ValidationError):
        Ledger(engine=async_engine)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        AsyncLedger(engine=create_engine(f"sqlite:///{tmp_path}/b.db"))  # type: ignore[arg-type]


def test_url_and_engine_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        Ledger(f"sqlite:///{tmp_path}/a.db", engine=create_engine("sqlite://"))


def test_the_schema_option_is_refused_on_sqlite(tmp_path: Path) -> None:
    with pytest.raises(SchemaError):
        Ledger(f"sqlite:///{tmp_path}/a.db", schema="agents")


def test_a_dialect_without_honest_rowcounts_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/rowcount.db"
    migrations.upgrade(url)
    with Ledger(url) as ledger:
        ledger.engine.dialect.supports_sane_rowcount = False
        with pytest.raises(DatabaseError) as raised:
            ledger.sessions.exists("x")
        assert "rows" in str(raised.value)


def test_a_closed_ledger_refuses_work() -> None:
    ledger = Ledger.in_memory()
    ledger.close()
    with pytest.raises(UsageError):
        ledger.sessions.exists("x")


async def test_in_memory_ledgers_are_private_to_each_other() -> None:
    async with AsyncLedger.in_memory() as first, AsyncLedger.in_memory() as second:
        await first.sessions.create("mine")
        assert await second.sessions.exists("mine") is False
        assert await first.sessions.exists("mine") is True


def test_an_unreachable_server_is_unavailable_and_the_password_is_masked() -> None:
    url = "postgresql://agent:s3cret-pw@127.0.0.1:1/nowhere"
    with Ledger(url) as ledger, pytest.raises(DatabaseUnavailableError) as raised:
        ledger.sessions.exists("x")
    assert "s3cret-pw" not in str(raised.value)
    assert raised.value.retryable


async def test_an_unreachable_server_is_unavailable_on_the_async_api() -> None:
    url = "postgresql://agent:s3cret-pw@127.0.0.1:1/nowhere"
    async with AsyncLedger(url) as ledger:
        with pytest.raises(DatabaseUnavailableError) as raised:
            await ledger.sessions.exists("x")
    assert "s3cret-pw" not in str(raised.value)


@pytest.mark.postgresql
async def test_ledgers_on_two_postgresql_schemas_do_not_see_each_other(tmp_path: Path) -> None:
    from ..databases import scratch_database

    with scratch_database("postgresql", str(tmp_path)) as url:
        for schema in ("tenant_a", "tenant_b"):
            migrations.upgrade(url, schema=schema)
        async with (
            AsyncLedger(url, schema="tenant_a") as a,
            AsyncLedger(url, schema="tenant_b") as b,
        ):
            record = await a.sessions.create("shared-id", title="in a")
            await a.messages.append(record, {"role": "user", "content": "hello a"})
            assert not await b.sessions.exists("shared-id")
            await b.sessions.create("shared-id", title="in b")
            assert (await a.sessions.get("shared-id")).title == "in a"
            assert (await b.sessions.get("shared-id")).title == "in b"
        with Ledger(url, schema="tenant_a") as sync_a:
            assert [m.content for m in sync_a.messages.all("shared-id")] == ["hello a"]


def test_run_raises_a_conflict_that_cannot_succeed_after_one_attempt() -> None:
    attempts = []

    def create_taken(uow: UnitOfWork) -> None:
        attempts.append(1)
        uow.sessions.create("taken")

    with Ledger.in_memory() as ledger:
        ledger.sessions.create("taken")
        with pytest.raises(ConflictError) as raised:
            ledger.run(create_taken)
    assert raised.value.reason == "exists" and len(attempts) == 1


async def test_async_run_raises_a_conflict_that_cannot_succeed_after_one_attempt() -> None:
    attempts = []

    async def create_taken(uow: AsyncUnitOfWork) -> None:
        attempts.append(1)
        await uow.sessions.create("taken")

    async with AsyncLedger.in_memory() as ledger:
        await ledger.sessions.create("taken")
        with pytest.raises(ConflictError) as raised:
            await ledger.run(create_taken)
    assert raised.value.reason == "exists" and len(attempts) == 1


def test_run_still_retries_a_stale_conflict_to_success() -> None:
    attempts = []

    def save_stale_once(uow: UnitOfWork) -> None:
        attempts.append(1)
        record = uow.sessions.get("s")
        if len(attempts) == 1:
            record = record.model_copy(update={"revision": record.revision - 1})
        uow.sessions.save(record.model_copy(update={"title": "saved"}))

    with Ledger.in_memory() as ledger:
        ledger.sessions.create("s")
        ledger.sessions.save(ledger.sessions.get("s").model_copy(update={"title": "first"}))
        ledger.run(save_stale_once)
        assert ledger.sessions.get("s").title == "saved"
    assert len(attempts) == 2


# -- engine_options: the pool of the engine a ledger creates -------------------------------


def test_engine_options_reach_the_engine_and_keep_the_ledger_s_own_set_up(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'pooled.db'}"
    with Ledger(
        url, engine_options={"pool_size": 7, "pool_recycle": 120}, lock_timeout=2
    ) as ledger:
        pool = ledger.engine.pool
        assert (pool.size(), pool._recycle) == (7, 120)  # type: ignore[attr-defined]
        with ledger.engine.connect() as connection:
            busy = connection.exec_driver_sql("PRAGMA busy_timeout").scalar()
            foreign_keys = connection.exec_driver_sql("PRAGMA foreign_keys").scalar()
        assert (busy, foreign_keys) == (2000, 1)


def test_engine_options_reach_an_async_ledger_s_engine(tmp_path: Path) -> None:
    ledger = AsyncLedger(f"sqlite:///{tmp_path / 'pooled.db'}", engine_options={"pool_size": 4})
    assert ledger.engine.sync_engine.pool.size() == 4  # type: ignore[attr-defined]


def test_an_engine_option_sqlalchemy_does_not_know_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match=r"engine_options: .*'pool_sise'") as raised:
        Ledger("sqlite://", engine_options={"pool_sise": 5})
    assert raised.value.path == "engine_options"


@pytest.mark.parametrize("options", [[("pool_size", 5)], {5: "pool_size"}, "pool_size=5"])
def test_engine_options_that_are_not_a_mapping_of_names_are_refused(options: object) -> None:
    with pytest.raises(ValidationError, match="engine_options must be a mapping"):
        Ledger("sqlite://", engine_options=options)  # type: ignore[arg-type]


def test_engine_options_with_a_borrowed_engine_are_refused() -> None:
    engine = create_engine("sqlite://")
    with pytest.raises(ValidationError, match="with engine=, create your engine with them"):
        Ledger(engine=engine, engine_options={"pool_size": 5})


@pytest.mark.parametrize("ledger_class", [Ledger, AsyncLedger])
def test_read_your_writes_that_is_not_a_bool_is_refused(ledger_class: type) -> None:
    with pytest.raises(ValidationError, match="read_your_writes must be True or False") as raised:
        ledger_class("sqlite://", read_your_writes="yes")
    assert raised.value.path == "read_your_writes"
