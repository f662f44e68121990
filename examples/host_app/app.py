"""The shop app: an agent places two orders; the second is declined and leaves no trace.

Deploy first (each tool keeps its own version table), then run:

    DATABASE_URL=sqlite:///shop.db ./deploy.sh
    python app.py sqlite:///shop.db

The URL is a SQLAlchemy URL with a driver (postgresql+psycopg://, mysql+pymysql://).
"""

from __future__ import annotations

import os
import sys

from shop.models import Order, User
from shop.orders import PaymentDeclined, place_order
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from agentledger import Ledger, configure_sqlite_engine

AGENT = "shop-assistant-ada"


def main(url: str) -> None:
    engine = create_engine(url)
    configure_sqlite_engine(engine)  # WAL, foreign keys, BEGIN IMMEDIATE; no-op elsewhere
    with Ledger(engine=engine) as ledger:  # raises SchemaError if the deploy was skipped
        with Session(engine) as session, session.begin():
            if session.get(User, 1) is None:
                session.add(User(id=1, email="ada@example.com", balance_cents=5000))
        ledger.sessions.get_or_create(AGENT, user_id="ada", title="Shopping assistant")

        order = place_order(
            engine, ledger, user_id=1, item="umbrella", amount_cents=2500, agent=AGENT
        )
        print(f"order {order} placed")
        try:
            place_order(engine, ledger, user_id=1, item="piano", amount_cents=900000, agent=AGENT)
        except PaymentDeclined as declined:
            print(f"declined: {declined}")

        with Session(engine) as session:
            items = session.scalars(select(Order.item).order_by(Order.id)).all()
            balance = session.get_one(User, 1).balance_cents
        steps = ledger.steps.last(AGENT, 10)
        print(f"orders: {items}; balance {balance}")
        print(f"agent steps: {[(s.name, s.input['item']) for s in steps]}")
    engine.dispose()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ["DATABASE_URL"])
