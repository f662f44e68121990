"""agentledger as the OpenAI Agents SDK's session store (extra ``openai-agents``).

- ``LedgerSession`` (``session``): the SDK's ``Session`` protocol on agentledger's own
  tables, under its migrations, with the SDK's compaction hooks.
- ``LedgerRunHooks`` (``hooks``): a run's model and tool calls as steps of the same
  session, with their token usage, and the run's end as ``finalize``.
- ``LedgerAdvancedSession`` (``advanced``): the SDK's ``AdvancedSQLiteSession`` on every
  database: branches of a conversation from a turn, usage per turn and per session.
"""

from __future__ import annotations

from .advanced import BranchExistsError, BranchNotFoundError, LedgerAdvancedSession
from .hooks import LedgerRunHooks, run_id_of, token_usage
from .session import LedgerSession, UnseenItems, item_of, messages_of

__all__ = [
    "BranchExistsError",
    "BranchNotFoundError",
    "LedgerAdvancedSession",
    "LedgerRunHooks",
    "LedgerSession",
    "UnseenItems",
    "item_of",
    "messages_of",
    "run_id_of",
    "token_usage",
]
