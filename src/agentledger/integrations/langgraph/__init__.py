"""LangGraph on agentledger: its checkpointer (``LedgerSaver``, ``AsyncLedgerSaver``,
in ``saver``) and its long-term memory store (``LedgerStore``, ``AsyncLedgerStore``, in
``store``), on one ledger, one database and one migration stream.

    saver, store = LedgerSaver(ledger), LedgerStore(ledger)
    graph = builder.compile(checkpointer=saver, store=store)
"""

from .saver import DEFAULT_APP_NAME, AsyncLedgerSaver, LedgerSaver
from .store import AsyncLedgerStore, LedgerStore

__all__ = ["DEFAULT_APP_NAME", "AsyncLedgerSaver", "AsyncLedgerStore", "LedgerSaver", "LedgerStore"]
