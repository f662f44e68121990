"""agentledger's ``LedgerSession`` in place of the OpenAI Agents SDK's SQL stores.

Copied into the tests folder of the SDK's source distribution as
``conftest_agentledger.py`` and imported at the end of its ``conftest.py``.
``AGENTLEDGER_SUITE_STORE`` says what the run's stores are: ``reference`` (the SDK's
own ``SQLiteSession``, ``AsyncSQLiteSession`` and ``SQLAlchemySession``), or a database
(``sqlite``, ``postgresql``, ``mysql``) whose agentledger ledger replaces them. Then
each of those names, where the tests import it (``agents``, ``agents.memory``,
``agents.extensions.memory`` and every test module's own globals), is an adapter with
the SDK class's constructor that builds a ``LedgerSession`` on that ledger.

One ledger serves the whole run (a SQLite file, or the migrated database
``AGENTLEDGER_SUITE_<DATABASE>_URL``). What the SDK keeps apart is kept apart by
scope (``app_name``): each database file or URL with its pair of table names is one
scope, shared by every session opened on it, and ``:memory:`` is a scope of its own
per session object (the SDK's in-memory database is private to its session).

The tests listed in ``AGENTLEDGER_SUITE_HANGS`` (they wait for a step of the SDK's
store that ``LedgerSession`` does not take) are skipped on ours, and a test still
running after ``TEST_TIMEOUT`` seconds is failed. Every run writes the ids of the
tests that built a store (``AGENTLEDGER_SUITE_BUILT``), so the comparison leaves out
the tests that never touch one.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import signal
import weakref
from pathlib import Path
from typing import Any

import agents
import agents.extensions.memory
import agents.memory
import pytest

# Imported before the names are replaced: it subclasses the SDK's SQLiteSession.
from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession  # noqa: F401
from agents.extensions.memory.async_sqlite_session import AsyncSQLiteSession as SdkAsyncSQLite
from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession as SdkSQLAlchemy
from agents.memory.sqlite_session import SQLiteSession as SdkSQLite
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agentledger import AsyncLedger
from agentledger.integrations.openai_agents import LedgerSession

STORE = os.environ["AGENTLEDGER_SUITE_STORE"]
BUILT = Path(os.environ["AGENTLEDGER_SUITE_BUILT"])
MEMORY = ":memory:"
TEST_TIMEOUT = 10


def _built() -> None:
    """Note that the running test built a store."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    if current:
        with BUILT.open("a") as built:
            built.write(current.rsplit(" (", 1)[0] + "\n")


class _Run:
    ledger: AsyncLedger | None = None
    scopes: dict[tuple[str, ...], str] = {}
    engines: weakref.WeakKeyDictionary[AsyncEngine, str] = weakref.WeakKeyDictionary()


def _ledger() -> AsyncLedger:
    if _Run.ledger is None:
        url = make_url(os.environ[f"AGENTLEDGER_SUITE_{STORE.upper()}_URL"])
        # The plain URL: AsyncLedger picks the dialect's async driver.
        _Run.ledger = AsyncLedger(url.set(drivername=url.get_backend_name()))
    return _Run.ledger


def _scope(*where: str) -> str:
    """The scope of a database and its tables; a new one for a private database."""
    if MEMORY in where:
        return f"sdk-{secrets.token_hex(8)}"
    return _Run.scopes.setdefault(where, f"sdk-{secrets.token_hex(8)}")


def _file(db_path: str | Path) -> str:
    return MEMORY if str(db_path) == MEMORY else str(Path(db_path).resolve())


class _Adapter(LedgerSession):
    def _open(self, session_id: str, settings: Any, *where: str) -> None:
        _built()
        super().__init__(session_id, _ledger(), session_settings=settings, app_name=_scope(*where))


class _SQLiteShaped(_Adapter):
    """``LedgerSession`` with the constructor of ``SQLiteSession`` and
    ``AsyncSQLiteSession``."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = MEMORY,
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        self.db_path = db_path
        self.sessions_table, self.messages_table = sessions_table, messages_table
        self._open(session_id, session_settings, _file(db_path), sessions_table, messages_table)


class AsyncSQLiteSession(_SQLiteShaped):
    """``LedgerSession`` as ``AsyncSQLiteSession`` (not a base of ``SQLiteSession``:
    tests tell the two apart with ``isinstance``)."""


class SQLiteSession(_SQLiteShaped):
    """``LedgerSession`` with ``agents.SQLiteSession``'s constructor and its
    synchronous ``close()``."""

    def close(self) -> None:  # type: ignore[override]
        # The ledger is borrowed, so LedgerSession.close only marks the session closed;
        # the SDK's close is synchronous (called inside and outside an event loop).
        self._closed = True


class SQLAlchemySession(_Adapter):
    """``LedgerSession`` with ``SQLAlchemySession``'s constructor and ``from_url``; the
    test's engine (``session.engine``, which tests dispose) names the database only."""

    def __init__(
        self,
        session_id: str,
        *,
        engine: AsyncEngine,
        create_tables: bool = False,
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
        ensure_ascii: bool = True,
    ) -> None:
        self._engine = engine
        url = engine.url
        # An in-memory database is the engine's own, shared by the sessions on it.
        private = url.database in (None, "", MEMORY)
        if private:
            database = _Run.engines.setdefault(engine, f"engine {secrets.token_hex(8)}")
        else:
            database = url.render_as_string()
        self._open(session_id, session_settings, database, sessions_table, messages_table)

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @classmethod
    def from_url(  # type: ignore[override]
        cls,
        session_id: str,
        *,
        url: str,
        engine_kwargs: dict[str, Any] | None = None,
        session_settings: Any = None,
        **kwargs: Any,
    ) -> SQLAlchemySession:
        engine = create_async_engine(url, **(engine_kwargs or {}))
        return cls(session_id, engine=engine, session_settings=session_settings, **kwargs)


OURS: dict[type, type] = {
    SdkSQLite: SQLiteSession,
    SdkAsyncSQLite: AsyncSQLiteSession,
    SdkSQLAlchemy: SQLAlchemySession,
}


def _recording(init: Any) -> Any:
    @functools.wraps(init)
    def recorded(self: Any, *args: Any, **kwargs: Any) -> None:
        _built()
        init(self, *args, **kwargs)

    return recorded


def _replace_in(module: Any) -> None:
    for name, value in list(vars(module).items()):
        if isinstance(value, type) and value in OURS:
            setattr(module, name, OURS[value])


if STORE == "reference":
    for sdk_class in OURS:
        sdk_class.__init__ = _recording(sdk_class.__init__)  # type: ignore[misc]
else:
    for package in (agents, agents.memory, agents.extensions.memory):
        _replace_in(package)
    for sdk_class, ours in OURS.items():
        setattr(agents.extensions.memory, sdk_class.__name__, ours)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Our stores in place of the SDK's in every test module's globals."""
    if STORE == "reference":
        return
    for module in {getattr(item, "module", None) for item in items} - {None}:
        _replace_in(module)
    hangs = set(os.environ.get("AGENTLEDGER_SUITE_HANGS", "").split("\n"))
    for item in items:
        if item.nodeid in hangs:
            item.add_marker(pytest.mark.skip(reason="listed in AGENTLEDGER_SUITE_HANGS"))


class TestTimedOut(Exception):
    """A test ran longer than ``TEST_TIMEOUT``."""


def _timed_out(signum: int, frame: object) -> None:
    raise TestTimedOut(f"over {TEST_TIMEOUT} s: a test that waits for an SDK store's step")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Fail a test that hangs (one waiting for a step of the SDK's store that
    ``LedgerSession`` does not take) rather than the run."""
    signal.signal(signal.SIGALRM, _timed_out)
    signal.alarm(TEST_TIMEOUT)
    try:
        return (yield)
    finally:
        signal.alarm(0)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _Run.ledger is not None:
        asyncio.run(_Run.ledger.close())
