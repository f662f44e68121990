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

from .bulk import BulkContract
from .checkpoints import (
    CheckpointConcurrencyContract,
    CheckpointContract,
    CheckpointExpiryContract,
)
from .grants import GrantContract
from .harness import Harness, SyncAdapter, drive, statements_during
from .messages import MessageConcurrencyContract, MessageContract
from .sessions import ConcurrencyContract, ListingContract, SessionContract, UnitOfWorkContract
from .steps import FinalizeContract, StepConcurrencyContract, StepContract, UsageContract

__all__ = [
    "BulkContract",
    "CheckpointConcurrencyContract",
    "CheckpointContract",
    "CheckpointExpiryContract",
    "ConcurrencyContract",
    "FinalizeContract",
    "GrantContract",
    "Harness",
    "ListingContract",
    "MessageConcurrencyContract",
    "MessageContract",
    "SessionContract",
    "StepConcurrencyContract",
    "StepContract",
    "SyncAdapter",
    "UnitOfWorkContract",
    "UsageContract",
    "drive",
    "statements_during",
]
