"""A ledger's read replicas: which one takes the next read, and which are resting.

A ledger built with ``readers=`` sends its ledger-level reads to them in turn. A reader
that cannot be reached (down, refusing connections, a standby being rebuilt) rests for
``REST_S`` seconds, during which reads skip it; when every reader rests, reads go to
the primary. So a dead standby costs one failed connection attempt per rest period
instead of one per read, and reads never stop while the primary answers.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from sqlalchemy import Engine

from ..errors import ValidationError
from .loops import Engines
from .urls import mask

logger = logging.getLogger("agentledger.readers")

REST_S = 5.0
"""How long a reader that could not be reached is skipped before it is tried again."""


def check_replica(primary: Engine, reader: Engine, index: int) -> None:
    """Refuse a reader that cannot be a replica of ``primary``: another kind of
    database."""
    if reader.dialect.name != primary.dialect.name:
        raise ValidationError(
            f"readers[{index}] ({mask(reader.url)}) is a {reader.dialect.name} database; "
            f"a replica of this {primary.dialect.name} primary is {primary.dialect.name} too",
            path=f"readers[{index}]",
        )


class Reader:
    """One read replica: its engines, and until when it rests."""

    def __init__(self, engines: Engines, index: int) -> None:
        self.engines = engines
        self.index = index
        """Its place in ``readers=`` (what a warning names, with its masked URL)."""
        self.checked = False
        """Whether its schema was checked (at its first read)."""
        self.resting_until = 0.0


class Readers:
    """The readers of one ledger, taken in turn (thread-safe; no I/O here)."""

    def __init__(
        self, engines: Sequence[Engines], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._all = [Reader(each, index) for index, each in enumerate(engines)]
        self._turns = itertools.cycle(self._all) if self._all else None
        self._lock = threading.Lock()
        self._clock = clock

    def __bool__(self) -> bool:
        return bool(self._all)

    def __iter__(self) -> Iterator[Reader]:
        return iter(self._all)

    def next(self) -> Reader | None:
        """The reader for the next read: the next in turn that is not resting, or None
        when all rest (the read goes to the primary)."""
        if self._turns is None:
            return None
        now = self._clock()
        with self._lock:
            for _ in self._all:
                reader = next(self._turns)
                if reader.resting_until <= now:
                    return reader
        return None

    def rest(self, reader: Reader, reason: BaseException) -> None:
        """``reader`` could not be reached: skip it for ``REST_S`` seconds."""
        with self._lock:
            already = reader.resting_until > self._clock()
            reader.resting_until = self._clock() + REST_S
        if not already:
            logger.warning(
                "reader %d (%s) could not be reached; reads skip it for %.0f s and go to "
                "the other readers, or to the primary: %s",
                reader.index,
                mask(reader.engines.main.url),
                REST_S,
                reason,
            )

    def dispose(self) -> None:
        """Close the pools of the readers the ledger created."""
        for reader in self._all:
            reader.engines.dispose()

    def forget_connections(self) -> None:
        """Let go of the readers' pooled connections unclosed (a fork's child)."""
        for reader in self._all:
            reader.engines.forget_connections()
