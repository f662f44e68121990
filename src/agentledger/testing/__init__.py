"""agentledger's contract suite, importable: run it against your own store.

Subclass the contract classes in a test module and provide a ``harness`` fixture
that yields a :class:`Harness` around your ledger::

    from agentledger.testing import Harness, SessionContract

    class TestMyStore(SessionContract):
        @pytest.fixture
        async def harness(self):
            yield Harness(ledger=MyLedger(...), mode="async", backend="mine")

Needs pytest and an asyncio plugin (pytest-asyncio in auto mode).
"""

from .harness import Harness, SyncAdapter, drive
from .messages import MessageConcurrencyContract, MessageContract
from .sessions import ConcurrencyContract, ListingContract, SessionContract, UnitOfWorkContract

__all__ = [
    "ConcurrencyContract",
    "Harness",
    "ListingContract",
    "MessageConcurrencyContract",
    "MessageContract",
    "SessionContract",
    "SyncAdapter",
    "UnitOfWorkContract",
    "drive",
]
