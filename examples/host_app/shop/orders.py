"""Placing an order: the shop's row and the agent's step in one transaction."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from agentledger import Ledger, NewStep

from .models import Order, User


class PaymentDeclined(Exception):
    """The user's balance does not cover the order."""


def place_order(
    engine: Engine, ledger: Ledger, *, user_id: int, item: str, amount_cents: int, agent: str
) -> int:
    """Record the order and the agent's tool step together: both commit or neither does.

    ``ledger.unit_of_work(join=session)`` runs agentledger's writes in a SAVEPOINT
    inside the shop's transaction, so the shop's commit makes both durable and any
    exception (here, a declined payment after the step was written) undoes both.
    """
    with Session(engine) as session, session.begin():
        order = Order(user_id=user_id, item=item, amount_cents=amount_cents, agent_session_id=agent)
        session.add(order)
        session.flush()  # gives order.id
        with ledger.unit_of_work(join=session) as uow:
            uow.steps.append(
                agent,
                NewStep(
                    kind="tool",
                    name="place_order",
                    input={"item": item, "amount_cents": amount_cents},
                    output={"order_id": order.id},
                ),
            )
        user = session.get_one(User, user_id, with_for_update=True)
        if user.balance_cents < amount_cents:
            raise PaymentDeclined(f"{item} costs {amount_cents}, balance is {user.balance_cents}")
        user.balance_cents -= amount_cents
        return order.id
