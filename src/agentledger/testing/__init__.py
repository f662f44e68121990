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

from .checkpoints import (
    CheckpointConcurrencyContract,
    CheckpointContract,
    CheckpointExpiryContract,
)
from .conversation import (
    AppendResultContract,
    AppendWithStateContract,
    MessageTimeContract,
    PopContract,
    StepQueryContract,
)
from .grants import GrantContract
from .harness import Harness, SyncAdapter, drive, statements_during
from .keys import IdempotentAppendContract, SessionKeyContract
from .messages import MessageConcurrencyContract, MessageContract
from .readonly import ReadOnlyUnitOfWorkContract
from .scoped_state import ScopedStateConcurrencyContract, ScopedStateContract
from .sessions import ConcurrencyContract, ListingContract, SessionContract, UnitOfWorkContract
from .steps import FinalizeContract, StepConcurrencyContract, StepContract, UsageContract

__all__ = [
    "AppendResultContract",
    "AppendWithStateContract",
    "CheckpointConcurrencyContract",
    "CheckpointContract",
    "CheckpointExpiryContract",
    "ConcurrencyContract",
    "FinalizeContract",
    "GrantContract",
    "Harness",
    "IdempotentAppendContract",
    "ListingContract",
    "MessageConcurrencyContract",
    "MessageContract",
    "MessageTimeContract",
    "PopContract",
    "ReadOnlyUnitOfWorkContract",
    "ScopedStateConcurrencyContract",
    "ScopedStateContract",
    "SessionContract",
    "SessionKeyContract",
    "StepConcurrencyContract",
    "StepContract",
    "StepQueryContract",
    "SyncAdapter",
    "UnitOfWorkContract",
    "UsageContract",
    "drive",
    "statements_during",
]
