"""agentledger: the durable memory of AI-agent harnesses.

Sessions (ordered messages and key/value state), the steps of each run, the user's
grants and checkpoints, stored in your relational database through SQLAlchemy 2.x,
versioned with Alembic, with optimistic concurrency on every dialect.
"""

from ._json import Limits
from .engine import configure_sqlite_engine
from .errors import (
    AgentLedgerError,
    ConflictError,
    CorruptRecordError,
    DatabaseError,
    DatabaseLockedError,
    DatabaseUnavailableError,
    InvalidIdError,
    NotFoundError,
    PermissionDeniedError,
    SchemaError,
    UsageError,
    ValidationError,
)
from .ledger import AsyncLedger, Ledger
from .models import AgentCheckpoint, AgentGrant, AgentMessage, AgentSession, AgentStep, metadata
from .records import (
    Checkpoint,
    CheckpointInfo,
    CheckpointPayload,
    Grant,
    Message,
    NewMessage,
    NewStep,
    Page,
    PendingToolCall,
    RunSummary,
    SessionOverview,
    SessionRecord,
    SessionSelection,
    SessionSummary,
    Step,
    TokenUsage,
)
from .retention import PurgePolicy
from .uow import AsyncUnitOfWork, UnitOfWork

__all__ = [
    "AgentCheckpoint",
    "AgentGrant",
    "AgentLedgerError",
    "AgentMessage",
    "AgentSession",
    "AgentStep",
    "AsyncLedger",
    "AsyncUnitOfWork",
    "Checkpoint",
    "CheckpointInfo",
    "CheckpointPayload",
    "ConflictError",
    "CorruptRecordError",
    "DatabaseError",
    "DatabaseLockedError",
    "DatabaseUnavailableError",
    "Grant",
    "InvalidIdError",
    "Ledger",
    "Limits",
    "Message",
    "NewMessage",
    "NewStep",
    "NotFoundError",
    "Page",
    "PendingToolCall",
    "PermissionDeniedError",
    "PurgePolicy",
    "RunSummary",
    "SchemaError",
    "SessionOverview",
    "SessionRecord",
    "SessionSelection",
    "SessionSummary",
    "Step",
    "TokenUsage",
    "UnitOfWork",
    "UsageError",
    "ValidationError",
    "configure_sqlite_engine",
    "metadata",
]
