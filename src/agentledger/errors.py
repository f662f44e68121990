"""The error hierarchy: every error the public API raises derives from AgentLedgerError.

Each class docstring says exactly when it is raised. Every error carries
``retryable``: True when running the same unit of work again may succeed.
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic_core

ConflictReason = Literal["stale", "exists", "deleted", "parent", "serialization", "duplicate"]


class AgentLedgerError(Exception):
    """Root of every error agentledger raises; no driver or SQLAlchemy error escapes."""

    retryable: bool = False


class InvalidIdError(AgentLedgerError, ValueError):
    """Raised before any SQL when a session id breaks the id rules.

    Session ids are 1 to 128 ASCII letters, digits, ``_``, ``-`` and ``.``, not
    starting with ``.``.
    """

    def __init__(self, message: str, *, value: object = None) -> None:
        super().__init__(message)
        self.value = value


class ValidationError(AgentLedgerError, ValueError):
    """Raised before any write when input breaks a rule: bad JSON, a naive datetime,
    a value over a size or depth limit, a tampered cursor, an unknown option.

    ``path`` names the offending key or field (for example ``state['user']['tags'][3]``).
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class RecordValidationError(ValidationError, pydantic_core.ValidationError):
    """Raised when a record (``NewMessage``, ``TokenUsage``, ``RunSummary``...) is built,
    or validated with ``model_validate``, from values that break its rules.

    It is agentledger's ``ValidationError`` (so a ``ValueError``) and also pydantic's
    ``ValidationError``, so code that caught pydantic's error keeps working:
    ``errors()`` lists every problem as pydantic reports it. ``path`` names the first
    offending field (``NewMessage.role``), and the message names every one.
    """

    def __init__(self, *args: Any) -> None:
        # pydantic's constructor (``from_exception_data``) builds the error in __new__
        # and passes its own arguments here.
        self.path = None

    @classmethod
    def of(cls, error: pydantic_core.ValidationError) -> RecordValidationError:
        """The same problems as pydantic's ``error``, as agentledger's error."""
        details: list[Any] = [
            {key: item[key] for key in ("type", "loc", "input", "ctx") if key in item}
            for item in error.errors(include_url=False)
        ]
        made = cls.from_exception_data(error.title, details)
        made.path = _where(error.title, details[0]["loc"]) if details else error.title
        return made

    def __str__(self) -> str:
        """``NewMessage.role: String should have at most 255 characters``, one part per
        problem, on one line."""
        return "; ".join(
            f"{_where(self.title, item['loc'])}: {item['msg']}"
            for item in self.errors(include_url=False)
        )


def _where(title: str, loc: tuple[int | str, ...]) -> str:
    parts = [title]
    for part in loc:
        if part == "[key]":
            parts.append(" (a key)")
        else:
            parts.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return "".join(parts)


class NotFoundError(AgentLedgerError, LookupError):
    """Raised when the session (or checkpoint) asked for does not exist.

    Also raised by writes that must never resurrect a deleted session: appending
    a step, granting, finalizing or checkpointing an unknown id.
    """

    def __init__(self, message: str, *, entity: str = "session", id: str | None = None) -> None:
        super().__init__(message)
        self.entity = entity
        self.id = id


class ConflictError(AgentLedgerError):
    """Raised when another writer got there first.

    ``reason`` is one of:

    - ``stale``: the record's revision is no longer the stored one; re-read and re-decide.
    - ``exists``: creating an id that is already taken.
    - ``deleted``: saving, appending to or replacing a session another writer deleted.
    - ``parent``: a checkpoint's expected parent is no longer the session's latest.
    - ``duplicate``: a message or step carries an external key the session already
      holds for other content (the same content is an idempotent retry, not an error).
    - ``serialization``: the database reported a serialization failure or deadlock;
      run the unit of work again (``retryable`` is True).
    """

    def __init__(
        self,
        message: str,
        *,
        reason: ConflictReason,
        id: str | None = None,
        expected: object = None,
        actual: object = None,
    ) -> None:
        super().__init__(message)
        self.reason: ConflictReason = reason
        self.id = id
        self.expected = expected
        self.actual = actual
        self.retryable = reason in ("stale", "serialization")


class SchemaError(AgentLedgerError):
    """Raised when the database schema is missing, behind or ahead of this package,
    or when a configuration the schema depends on is refused (a PostgreSQL schema
    name on SQLite, say). ``hint`` is the command that fixes it, when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        current: str | None = None,
        head: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(f"{message}\n  hint: {hint}" if hint else message)
        self.current = current
        self.head = head
        self.hint = hint


class DatabaseError(AgentLedgerError):
    """Raised for a database failure a caller can act on, or one agentledger cannot
    classify further. The message carries the URL with its password masked.
    """


class CorruptRecordError(DatabaseError):
    """Raised when a stored value cannot be decoded (JSON that is not JSON, say, written
    by something other than agentledger). Names the table, the row and the column;
    the row is never skipped or replaced silently."""

    def __init__(self, message: str, *, table: str, key: object, column: str) -> None:
        super().__init__(message)
        self.table = table
        self.key = key
        self.column = column


class DatabaseUnavailableError(DatabaseError):
    """Raised when the database cannot be reached, refuses new connections (too many,
    shutting down) or the connection was lost before a commit.

    Nothing of the unit of work that was running is stored; running it again is safe.
    A connection lost *during* the commit is the subclass ``CommitUnknownError``.
    """

    retryable = True


class CommitUnknownError(DatabaseUnavailableError):
    """Raised when the connection was lost while the database was committing: the
    transaction may or may not be stored, and the driver cannot say which.

    ``retryable`` is False: running the same writes again could store them twice (a
    blind append) or apply a change twice (an increment, a delta). Neither the
    ledger's own retry nor ``ledger.run`` replays such work; the ledger replays only
    a call it knows is idempotent (an append whose every message or step has an
    external key, which finds the stored rows and returns them). To resolve the doubt,
    re-read and look for the change, or give the writes keys and run them again.
    """

    retryable = False


class DatabaseLockedError(DatabaseError):
    """Raised when a lock could not be had in time: a lock wait that ran out its
    timeout (SQLite's busy timeout, PostgreSQL's ``lock_timeout``, MariaDB/MySQL's
    ``innodb_lock_wait_timeout``; see the ledger's ``lock_timeout``).

    ``retryable`` is False after a wait that ran the whole timeout: the caller chose
    how long to wait, and no retry of agentledger's adds to it. It is True when the
    lock was refused at once without a wait (SQLite's busy snapshot or recovery).
    """

    retryable = False


class QueryCancelledError(DatabaseError):
    """Raised when the database cancelled a statement before it finished: it ran past
    its statement timeout (the ledger's ``statement_timeout``), or an administrator
    cancelled it (PostgreSQL reports both with one SQLSTATE). The transaction was
    rolled back; running it again would most likely run out of time again."""


class ResourceExhaustedError(DatabaseError):
    """Raised when the database ran out of disk space or memory for the statement
    (``resource`` is ``"disk"`` or ``"memory"``). Nothing of the unit of work is
    stored; it fails again until space or memory is freed, so it is not retryable."""

    def __init__(self, message: str, *, resource: Literal["disk", "memory"]) -> None:
        super().__init__(message)
        self.resource = resource


class PermissionDeniedError(DatabaseError):
    """Raised when the database refuses the operation: the database user lacks a
    privilege it needs, or (the subclass ``ReadOnlyDatabaseError``) the database or
    the transaction accepts only reads."""


class ReadOnlyDatabaseError(PermissionDeniedError):
    """Raised when a write (or a transaction that would write) reaches a database that
    accepts only reads:

    - PostgreSQL: a hot standby, ``default_transaction_read_only``, a read-only
      transaction (SQLSTATE 25006, ``read_only_sql_transaction``), and a transaction
      mode a server in recovery cannot take (SQLSTATE 0A000 from the check of a
      transaction setting: "cannot set transaction read-write mode during recovery",
      "cannot use serializable mode in a hot standby");
    - MariaDB/MySQL: ``read_only`` or ``--read-only`` (errno 1290, 1836) and a READ ONLY
      transaction (1792);
    - SQLite: a file opened read-only (``SQLITE_READONLY``, or refused before any SQL
      when this process cannot write the file or its folder).

    Nothing was written. It is not retryable: the same server refuses again until it
    is promoted or reconfigured; send writes to the primary. Reads work there.
    """


class UsageError(AgentLedgerError, RuntimeError):
    """Raised when the API is used in a way that cannot work: a ledger-level call
    inside an open unit of work of the same task, a closed ledger, a unit of work
    used after it ended.
    """
