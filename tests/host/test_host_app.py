"""examples/host_app on every dialect: an order and an agent step commit together or not
at all, in the host's own transaction."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, select
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from agentledger import Ledger, NotFoundError, configure_sqlite_engine

from ..databases import dialect_params, scratch_database
from ._support import HOST_APP, run

pytestmark = pytest.mark.slow  # a host project migrated through Alembic on each database


def _shop() -> tuple[ModuleType, ModuleType]:
    sys.path.insert(0, str(HOST_APP))
    try:
        from shop import models, orders
    finally:
        sys.path.remove(str(HOST_APP))
    return models, orders


models, orders = _shop()


@pytest.fixture(scope="module", params=dialect_params())
def deployed(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[URL]:
    with scratch_database(request.param, str(tmp_path_factory.mktemp("shop"))) as url:
        run(HOST_APP / "deploy.sh", url=url, cwd=HOST_APP)
        yield url


@pytest.fixture
def shop(deployed: URL) -> Iterator[tuple[Engine, Ledger]]:
    engine = create_engine(deployed)
    configure_sqlite_engine(engine)
    with Ledger(engine=engine) as ledger:
        yield engine, ledger
    engine.dispose()


def test_the_app_places_one_order_and_records_one_step(deployed: URL) -> None:
    out = run(sys.executable, "app.py", url=deployed, cwd=HOST_APP).stdout

    assert re.search(r"^order \d+ placed$", out, re.MULTILINE), out
    assert "declined: piano costs 900000, balance is 2500" in out
    assert "orders: ['umbrella']; balance 2500" in out
    assert "agent steps: [('place_order', 'umbrella')]" in out


def _customer(engine: Engine, ledger: Ledger, user_id: int, balance: int) -> str:
    with Session(engine) as session, session.begin():
        session.add(models.User(id=user_id, email=f"u{user_id}@example.com", balance_cents=balance))
    agent = f"agent-{user_id}"
    ledger.sessions.create(agent, user_id=str(user_id))
    return agent


def _orders_of(engine: Engine, user_id: int) -> list[str]:
    with Session(engine) as session:
        query = select(models.Order.item).where(models.Order.user_id == user_id)
        return list(session.scalars(query))


def _balance(engine: Engine, user_id: int) -> int:
    with Session(engine) as session:
        return int(session.get_one(models.User, user_id).balance_cents)


def test_a_paid_order_commits_the_order_and_the_step(shop: tuple[Engine, Ledger]) -> None:
    engine, ledger = shop
    agent = _customer(engine, ledger, 101, balance=1000)

    order_id = orders.place_order(
        engine, ledger, user_id=101, item="kettle", amount_cents=400, agent=agent
    )

    assert _orders_of(engine, 101) == ["kettle"]
    assert _balance(engine, 101) == 600
    (step,) = ledger.steps.last(agent, 10)
    assert (step.name, step.output) == ("place_order", {"order_id": order_id})
    assert ledger.sessions.get(agent).step_count == 1


def test_a_declined_payment_rolls_back_the_order_and_the_step(
    shop: tuple[Engine, Ledger],
) -> None:
    engine, ledger = shop
    agent = _customer(engine, ledger, 102, balance=100)

    with pytest.raises(orders.PaymentDeclined):
        orders.place_order(engine, ledger, user_id=102, item="sofa", amount_cents=500, agent=agent)

    assert _orders_of(engine, 102) == []
    assert _balance(engine, 102) == 100
    assert ledger.steps.last(agent, 10) == []
    assert ledger.sessions.get(agent).step_count == 0


def test_a_failed_ledger_write_rolls_back_the_order(shop: tuple[Engine, Ledger]) -> None:
    engine, ledger = shop
    _customer(engine, ledger, 103, balance=1000)

    with pytest.raises(NotFoundError):
        orders.place_order(
            engine, ledger, user_id=103, item="lamp", amount_cents=100, agent="no-such-agent"
        )

    assert _orders_of(engine, 103) == []
    assert _balance(engine, 103) == 1000
