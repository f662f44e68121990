"""An app's own row and an agent message, committed (or rolled back) together.

The app has its own table (orders) in the same database and its own ORM session.
`ledger.unit_of_work(join=session)` runs agentledger's writes in a SAVEPOINT inside
the app's transaction, so the app's commit makes both durable, and its rollback
undoes both.

    python examples/join_app_transaction.py [DATABASE_URL]
"""

from __future__ import annotations

import asyncio
import sys

from sqlalchemy import String, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agentledger import AsyncLedger, NewMessage


class AppBase(DeclarativeBase):
    pass


class Order(AppBase):
    """The host application's own table."""

    __tablename__ = "shop_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str] = mapped_column(String(100))


async def place_order(ledger: AsyncLedger, item: str, *, fail: bool) -> None:
    async with AsyncSession(ledger.engine) as session, session.begin():
        session.add(Order(item=item))
        async with ledger.unit_of_work(join=session) as uow:
            await uow.messages.append(
                "support-chat", NewMessage(role="assistant", content=f"Ordered {item} for you.")
            )
        if fail:
            raise RuntimeError("payment declined")  # the app's transaction rolls back


async def main(url: str | None = None) -> None:
    async with AsyncLedger(url) as ledger:
        await ledger.upgrade()
        async with ledger.engine.begin() as connection:
            await connection.run_sync(AppBase.metadata.create_all)
        await ledger.sessions.get_or_create("support-chat", title="Shopping assistant")

        await place_order(ledger, "umbrella", fail=False)
        try:
            await place_order(ledger, "piano", fail=True)
        except RuntimeError as error:
            print("second order failed:", error)

        async with AsyncSession(ledger.engine) as session:
            items = (await session.scalars(select(Order.item).order_by(Order.id))).all()
            count = await session.scalar(select(func.count()).select_from(Order))
        messages = await ledger.messages.all("support-chat")
        print(f"orders ({count}):", items)
        print("agent messages:", [m.content for m in messages])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
