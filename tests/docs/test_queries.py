"""The ORM queries of docs/querying-with-the-orm.md: right answers on every dialect, and
on PostgreSQL each reads through the index the page names (EXPLAIN, no Seq Scan)."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from agentledger import Ledger, NewStep, TokenUsage, migrations

from ..databases import migrated, scratch_database
from ..migrations._support import new_session

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


expensive = _example("query_expensive_sessions").most_expensive_sessions
latest = _example("query_latest_sessions").latest_sessions
run_steps = _example("query_run_steps").steps_of_run
grants = _example("query_active_grants").active_grants
usage = _example("query_usage_per_model").usage_per_model
in_schema = _example("query_in_a_schema").sessions_of_user

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.at = NOW

    def __call__(self) -> datetime:
        self.at += timedelta(microseconds=1)
        return self.at


def _seed(ledger: Ledger, clock: Clock) -> None:
    # (day of the month or April 10, id, user, app, [(run, model, total tokens)])
    sessions = [
        (datetime(2026, 4, 10, tzinfo=UTC), "ada-april", "ada", "travel", [("r1", "m-a", 1000)]),
        (datetime(2026, 5, 2, tzinfo=UTC), "ada-cheap", "ada", "travel", [("r1", "m-a", 30)]),
        (
            datetime(2026, 5, 3, tzinfo=UTC),
            "ada-pricey",
            "ada",
            "travel",
            [("r1", "m-a", 100), ("r2", "m-b", 150), ("r1", "m-b", 200), ("r2", "m-a", 50)],
        ),
        (datetime(2026, 5, 4, tzinfo=UTC), "bob-1", "bob", "chat", [("r1", "m-b", 900)]),
        (datetime(2026, 5, 5, tzinfo=UTC), "ada-mid", "ada", "chat", [("r1", "m-a", 200)]),
    ]
    for day, id, user, app, steps in sessions:
        clock.at = day
        ledger.sessions.create(id, user_id=user, app_name=app)
        for run, model, total in steps:
            tokens = TokenUsage(input_tokens=total - 10, output_tokens=10, total_tokens=total)
            ledger.steps.append(id, NewStep(run_id=run, model=model, usage=tokens))
    clock.at = NOW
    ledger.grants.grant("ada-pricey", "tool:search")
    ledger.grants.grant("ada-pricey", "tool:shell", expires_at=NOW - timedelta(days=1))
    ledger.grants.grant("ada-pricey", "tool:email", expires_at=NOW + timedelta(days=10))


@pytest.fixture(scope="module")
def seeded(migrated_url: URL) -> URL:
    clock = Clock()
    with Ledger(migrated_url, clock=clock) as ledger:
        _seed(ledger, clock)
    return migrated_url


@pytest.fixture
def session(seeded: URL) -> Iterator[Session]:
    engine = create_engine(seeded, poolclass=NullPool)
    with Session(engine) as orm:
        yield orm
    engine.dispose()


def test_the_most_expensive_sessions_of_a_user_this_month(session: Session) -> None:
    found = expensive(session, "ada", NOW)
    assert [(s.id, s.total_tokens) for s in found] == [
        ("ada-pricey", 500),
        ("ada-mid", 200),
        ("ada-cheap", 30),
    ]


def test_the_latest_sessions_of_an_app(session: Session) -> None:
    assert [id for id, _, _ in latest(session, "travel")] == [
        "ada-pricey",
        "ada-cheap",
        "ada-april",
    ]
    assert [id for id, _, _ in latest(session, "chat", n=1)] == ["ada-mid"]


def test_the_steps_of_a_run_in_order(session: Session) -> None:
    steps = run_steps(session, "ada-pricey", "r1")
    assert [(s.seq, s.model, s.total_tokens) for s in steps] == [(1, "m-a", 100), (3, "m-b", 200)]


def test_the_active_grants(session: Session) -> None:
    assert grants(session, "ada-pricey", NOW) == ["tool:email", "tool:search"]


def test_token_usage_per_model_since(session: Session) -> None:
    assert usage(session, datetime(2026, 5, 1, tzinfo=UTC)) == {
        "m-a": (340, 40, 380),
        "m-b": (1220, 30, 1250),
    }


@pytest.mark.postgresql
def test_the_schema_option_through_schema_translate_map(tmp_path: Path) -> None:
    with scratch_database("postgresql", str(tmp_path)) as url:
        migrations.upgrade(url, schema="agents")
        engine = create_engine(url, poolclass=NullPool)
        try:
            agents = engine.execution_options(schema_translate_map={None: "agents"})
            with Session(agents) as orm, orm.begin():
                orm.add(new_session("in-agents", user_id="ada"))
            assert in_schema(engine, "agents", "ada") == ["in-agents"]
        finally:
            engine.dispose()


SESSIONS, STEPS, GRANTS = 20_000, 200_000, 60_000
POPULATE = [
    "INSERT INTO agentledger_sessions (id, app_name, user_id, status, state, message_count, "
    "message_seq, step_count, checkpoint_seq, input_tokens, output_tokens, total_tokens, "
    "created_at, updated_at, revision) "
    "SELECT 's' || lpad(g::text, 6, '0'), 'app' || (g %% 5), 'user' || (g %% 200), 'active', "
    "'{}', 0, 0, 10, 0, 0, 0, (g::bigint * 7919) %% 10000, "
    f"timestamptz '2026-01-01' + g * interval '90 days' / {SESSIONS}, "
    f"timestamptz '2026-01-01' + g * interval '90 days' / {SESSIONS}, 1 "
    f"FROM generate_series(0, {SESSIONS - 1}) g",
    "INSERT INTO agentledger_steps (session_id, seq, step_index, run_id, kind, model, "
    "input_tokens, output_tokens, total_tokens, started_at) "
    f"SELECT 's' || lpad((g %% {SESSIONS})::text, 6, '0'), g / {SESSIONS} + 1, 0, "
    f"'run-' || (g / {SESSIONS} / 3), 'model', 'model-' || (g %% 5), 10, 1, 11, "
    f"timestamptz '2026-01-01' + g * interval '90 days' / {STEPS} "
    f"FROM generate_series(0, {STEPS - 1}) g",
    "INSERT INTO agentledger_grants (session_id, capability, capability_hash, granted_at, "
    f"expires_at) SELECT 's' || lpad((g %% {SESSIONS})::text, 6, '0'), 'cap-' || g, "
    "md5(g::text) || md5(g::text), timestamptz '2026-01-01', "
    "CASE WHEN g %% 2 = 0 THEN NULL ELSE timestamptz '2026-06-01' END "
    f"FROM generate_series(0, {GRANTS - 1}) g",
    "ANALYZE",
]


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[URL]:
    with scratch_database("postgresql", str(tmp_path_factory.mktemp("plans"))) as url:
        migrated(url)
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as connection:
            for statement in POPULATE:
                connection.exec_driver_sql(statement)
        engine.dispose()
        yield url


def _plan(url: URL, query: Callable[..., Any], *args: Any) -> str:
    """EXPLAIN of the statement ``query(session, *args)`` runs."""
    engine = create_engine(url, poolclass=NullPool)
    seen: list[tuple[str, Any]] = []

    @event.listens_for(engine, "before_cursor_execute")
    def record(_c: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    try:
        with Session(engine) as orm:
            query(orm, *args)
        ((statement, parameters),) = [s for s in seen if s[0].lstrip().startswith("SELECT")]
        with engine.connect() as connection:
            lines = connection.exec_driver_sql(f"EXPLAIN {statement}", parameters).scalars()
            return "\n".join(lines)
    finally:
        engine.dispose()


@pytest.mark.postgresql
@pytest.mark.parametrize(
    ("query", "args", "index"),
    [
        (
            expensive,
            ("user42", datetime(2026, 3, 15, tzinfo=UTC)),
            "ix_agentledger_sessions_user_id_updated_at_id",
        ),
        # A common app (a fifth of the rows here): reading the updated_at index
        # backwards and skipping other apps' rows is as quick.
        (latest, ("app3",), "ix_agentledger_sessions_(app_name_)?updated_at_id"),
        (run_steps, ("s000042", "run-1"), "ix_agentledger_steps_session_id_run_id_seq"),
        (
            grants,
            ("s000042", datetime(2026, 5, 1, tzinfo=UTC)),
            "uq_agentledger_grants_session_id_capability_hash",
        ),
        (
            usage,
            (datetime(2026, 3, 31, tzinfo=UTC),),
            "ix_agentledger_steps_started_at_model",
        ),
    ],
    ids=["expensive-sessions", "latest-sessions", "run-steps", "active-grants", "usage"],
)
def test_each_query_reads_through_its_index(
    populated: URL, query: Callable[..., Any], args: tuple[Any, ...], index: str
) -> None:
    plan = _plan(populated, query, *args)
    scan = f"(Index|Index Only|Bitmap Index) Scan( Backward)? (using|on) {index} "
    assert re.search(scan, plan), plan
    assert "Seq Scan" not in plan, plan
