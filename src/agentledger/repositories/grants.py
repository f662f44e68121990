"""Grants: capabilities the user approved for a session, so a resumed run does not ask
again. Only approvals are stored: remembering a refusal forever would silently block
something the user may allow next time, and being asked twice is the lesser harm."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, delete, or_, select
from sqlalchemy.orm import Session

from .._checks import checked_text
from .._limits import MAX_CAPABILITY_LENGTH
from ..clock import utc
from ..errors import NotFoundError, ValidationError
from ..ids import validate_id
from ..models import AgentGrant
from ..records import Grant
from ._base import Repository, operation
from ._session_row import session_exists
from ._statements import upsert_rows

_GRANTS = cast(Table, AgentGrant.__table__)
_READ = select(
    _GRANTS.c.session_id,
    _GRANTS.c.capability,
    _GRANTS.c.granted_by,
    _GRANTS.c.granted_at,
    _GRANTS.c.expires_at,
)


def upsert_grant(session: Session, values: dict[str, Any]) -> None:
    """Insert a grant, or refresh ``granted_by``, ``granted_at`` and ``expires_at`` of the
    one already there, in one statement that concurrent granters cannot race
    (``upsert_rows``: ``ON CONFLICT ... DO UPDATE`` on PostgreSQL and SQLite, ``ON
    DUPLICATE KEY UPDATE`` on MariaDB/MySQL, an UPDATE then an INSERT elsewhere)."""
    table = cast(Table, AgentGrant.__table__)
    upsert_rows(
        session.connection(),
        table,
        [values],
        ("session_id", "capability_hash"),
        ("granted_by", "granted_at", "expires_at"),
    )


def _capability(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_CAPABILITY_LENGTH:
        raise ValidationError(
            f"a capability is a string of 1 to {MAX_CAPABILITY_LENGTH} characters",
            path="capability",
        )
    if "\x00" in value:
        raise ValidationError("a capability cannot contain a NUL character", path="capability")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            "a capability cannot contain a lone surrogate", path="capability"
        ) from None
    return value


def capability_hash(capability: str) -> str:
    """The unique key of a capability: SHA-256 of its UTF-8 text, in hex."""
    return hashlib.sha256(capability.encode("utf-8")).hexdigest()


class GrantRepository(Repository):
    """The single implementation of the grant operations."""

    def _active(self, now: datetime) -> Any:
        return or_(_GRANTS.c.expires_at.is_(None), _GRANTS.c.expires_at > now)

    @operation(writes=True)
    def grant(
        self,
        id: str,
        capability: str,
        *,
        granted_by: str | None = None,
        expires_at: datetime | None = None,
    ) -> Grant:
        """Record that the user approved ``capability`` for session ``id``.

        Granting again refreshes ``granted_by``, ``granted_at`` and ``expires_at``.

        Raises:
            NotFoundError: no such session (never created, or deleted).
            ValidationError: an empty or over-long capability, a naive ``expires_at``.
        """
        validate_id(id)
        capability = _capability(capability)
        if granted_by is not None:
            checked_text(granted_by, "granted_by", max_length=255, min_length=0)
        expires = utc(expires_at, field="expires_at") if expires_at is not None else None
        now = self._work.settings.now()
        # Holding the session row (shared) until commit keeps a concurrent delete from
        # slipping between this check and the insert: a grant never outlives its session.
        if not session_exists(self._session, id, lock="share"):
            raise NotFoundError(f"no session {id!r}: the grant is not stored", id=id)
        upsert_grant(
            self._session,
            {
                "session_id": id,
                "capability": capability,
                "capability_hash": capability_hash(capability),
                "granted_by": granted_by,
                "granted_at": now,
                "expires_at": expires,
            },
        )
        return Grant(
            session_id=id,
            capability=capability,
            granted_by=granted_by,
            granted_at=now,
            expires_at=expires,
        )

    @operation(writes=False)
    def is_granted(self, id: str, capability: str) -> bool:
        """Whether ``capability`` is approved for session ``id`` and not expired."""
        validate_id(id)
        capability = _capability(capability)
        query = select(_GRANTS.c.id).where(
            _GRANTS.c.session_id == id,
            _GRANTS.c.capability_hash == capability_hash(capability),
            _GRANTS.c.capability == capability,
            self._active(self._work.settings.now()),
        )
        return self._session.execute(query.limit(1)).first() is not None

    @operation(writes=False)
    def active(self, id: str) -> list[Grant]:
        """The unexpired grants of session ``id``, by capability.

        Raises:
            NotFoundError: no such session.
        """
        validate_id(id)
        query = _READ.where(
            _GRANTS.c.session_id == id, self._active(self._work.settings.now())
        ).order_by(_GRANTS.c.capability)
        rows = self._session.execute(query).all()
        if not rows and not session_exists(self._session, id):
            raise NotFoundError(f"no session {id!r}", id=id)
        return [Grant.model_validate(dict(row._mapping)) for row in rows]

    @operation(writes=True)
    def revoke(self, id: str, capability: str | None = None) -> int:
        """Withdraw one grant, or every grant of the session when ``capability`` is None;
        returns how many were removed."""
        validate_id(id)
        statement = delete(_GRANTS).where(_GRANTS.c.session_id == id)
        if capability is not None:
            capability = _capability(capability)
            statement = statement.where(
                _GRANTS.c.capability_hash == capability_hash(capability),
                _GRANTS.c.capability == capability,
            )
        return int(self._session.execute(statement).rowcount)  # type: ignore[attr-defined]
