"""agentledger's contract suite, importable: run it against your own store.

Subclass the contract classes in a test module and provide a ``harness`` fixture
that yields a :class:`Harness` around your store::

    import pytest
    from agentledger.testing import Harness, SessionContract

    class TestMyStore(SessionContract):
        @pytest.fixture
        async def harness(self):
            ledger = MyLedger(...)
            yield Harness(ledger=ledger, mode="async", backend="mine")
            await ledger.close()

What your store provides (every detail in :class:`Harness`):

- ``ledger``: an object with agentledger's async API (``AsyncLedger``'s shape): the
  repositories ``sessions``, ``messages``, ``steps``, ``grants``, ``checkpoints``,
  ``app_state``, ``user_state`` and ``memory``, ``unit_of_work()``, ``run()`` and
  ``close()``, returning agentledger's records and
  raising agentledger's errors. A sync store takes part as ``SyncAdapter(ledger)``
  with ``mode="sync"``.
- ``mode`` (``"async"`` or ``"sync"``: concurrency runs as tasks or as threads) and
  ``backend`` (a name for messages).
- Optional hooks, each a callable: ``reopen`` (a second ledger on the same data, as
  a new process opens it), ``configured`` (a second ledger with its own ``clock`` or
  ``limits``) and ``caller_transaction`` (a host application's transaction for
  ``unit_of_work(join=...)``; ``sqlalchemy_caller_transaction(ledger)`` makes it for a
  ledger with a SQLAlchemy ``engine``). A test that needs a hook you leave out is
  skipped, naming the hook.

Each test declares its tier (``tier``): whether it can differ by database, or by
driver and API too. A store on several databases can run each test only where it can
differ; one on a single database can ignore tiers.

The suite speaks to the store only through that API and those hooks. What it needs
to run: pytest (8 or later) and pytest-asyncio in auto mode (``asyncio_mode =
"auto"``), because the tests and the ``harness`` fixture are coroutines. Each test
expects an empty store: give every test a fresh one, or empty it after each.
"""

from .bulk import BulkContract
from .checkpoints import (
    CheckpointConcurrencyContract,
    CheckpointContract,
    CheckpointExpiryContract,
)
from .conversation import (
    AppendResultContract,
    AppendWithStateContract,
    ConversationReadContract,
    MessageTimeContract,
    PopContract,
    StepQueryContract,
)
from .grants import GrantContract
from .harness import (
    CallerTransaction,
    Harness,
    SyncAdapter,
    Tier,
    drive,
    sqlalchemy_caller_transaction,
    tier,
    tier_of,
)
from .keys import IdempotentAppendContract, SessionKeyContract
from .memory import (
    MemoryConcurrencyContract,
    MemoryContract,
    MemoryExpiryContract,
    MemoryKeywordContract,
)
from .messages import MessageConcurrencyContract, MessageContract
from .readonly import ReadOnlyUnitOfWorkContract
from .scoped_state import ScopedStateConcurrencyContract, ScopedStateContract
from .sessions import ConcurrencyContract, ListingContract, SessionContract, UnitOfWorkContract
from .steps import FinalizeContract, StepConcurrencyContract, StepContract, UsageContract

__all__ = [
    "AppendResultContract",
    "AppendWithStateContract",
    "BulkContract",
    "CallerTransaction",
    "CheckpointConcurrencyContract",
    "CheckpointContract",
    "CheckpointExpiryContract",
    "ConcurrencyContract",
    "ConversationReadContract",
    "FinalizeContract",
    "GrantContract",
    "Harness",
    "IdempotentAppendContract",
    "ListingContract",
    "MemoryConcurrencyContract",
    "MemoryContract",
    "MemoryExpiryContract",
    "MemoryKeywordContract",
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
    "Tier",
    "UnitOfWorkContract",
    "UsageContract",
    "drive",
    "sqlalchemy_caller_transaction",
    "tier",
    "tier_of",
]
