"""What a ledger offers the parts built on it (``transfer``, ``retention``).

A Protocol, so those parts never import ``ledger.py``, which imports them: imports run
one way, from the ledger down. ``Ledger`` is the one implementation.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from sqlalchemy import Connection, Engine

from ._concurrency import Waits
from .repositories._base import Settings, Work


class Host(Protocol):
    """A sync ledger, as its own parts use it."""

    settings: Settings
    _waits: Waits

    @property
    def engine(self) -> Engine:
        """The ledger's engine."""

    def _transaction(self, *, writes: bool, snapshot: bool = False) -> AbstractContextManager[Work]:
        """A fresh transaction of the ledger (``snapshot``: one snapshot however long a
        read lasts), refused inside an open unit of work of the same task."""

    def _connection(self) -> AbstractContextManager[Connection]:
        """A connection outside any transaction (SQLite's VACUUM needs one)."""


class AsyncHost(Protocol):
    """An async ledger, as its own parts use it: the sync ledger behind it."""

    @property
    def sync_ledger(self) -> Host:
        """The sync ledger every call is handed to."""
