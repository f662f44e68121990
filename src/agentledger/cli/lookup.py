"""Finding a session by the id the user knows: agentledger's own id, or the key a
framework gave it. Every integration stores its framework's id as the session's
external key: a LangGraph thread id (app ``langgraph`` unless the saver was given
another), an ADK session id (scoped by the ADK app and user), an OpenAI Agents
session id. ``find_session`` is the one look-up ``sessions show`` and ``sessions
delete`` make; ``sessions list --key`` filters by the same key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidIdError, NotFoundError
from ..ledger import Ledger
from ..records import SessionSummary
from .common import UsageError
from .output import clean, shorten

CANDIDATES_SHOWN = 10
"""Sessions an ambiguous id's error lists (it says when there are more)."""


@dataclass(frozen=True)
class Scope:
    """``--app`` and ``--user``: where a key is looked for (None: any)."""

    app_name: str | None = None
    user_id: str | None = None

    def holds(self, app_name: str | None, user_id: str | None) -> bool:
        """Whether a session of (app_name, user_id) is inside this scope."""
        return self.app_name in (None, app_name) and self.user_id in (None, user_id)

    def words(self) -> str:
        """`` in app 'a', user 'u'`` for a narrowed scope; else nothing."""
        parts = [
            f"{name} {value!r}"
            for name, value in (("app", self.app_name), ("user", self.user_id))
            if value is not None
        ]
        return f" in {', '.join(parts)}" if parts else ""


@dataclass(frozen=True)
class Found:
    """A session that the text names, and how: by its id or by its key."""

    id: str
    external_key: str | None
    app_name: str | None
    user_id: str | None
    by: Literal["id", "key"]
    """How the text named it: as its agentledger id, or as its key."""


def find_session(ledger: Ledger, text: str, scope: Scope | None = None) -> Found:
    """The one session that ``text`` names in ``scope``: the session whose agentledger id
    it is, or the session whose external key (a framework's id) it is, in any scope
    unless narrowed. A session named both ways (its id is its key) counts once.

    Raises:
        NotFoundError: no session has that id or that key (in the scope).
        UsageError: the text names more than one session (the id of one and the key of
            another, or a key used in several scopes); the message lists them.
    """
    scope = scope or Scope()
    found = {item.id: item for item in _by_key(ledger, text, scope)}
    by_id = _by_id(ledger, text, scope)
    if by_id is not None and by_id.id not in found:
        found[by_id.id] = by_id
    if not found:
        where = scope.words() or " in any scope"
        raise NotFoundError(f"no session {text!r}: no session has that id, nor that key{where}")
    if len(found) > 1:
        raise UsageError(_ambiguous(text, list(found.values())))
    return next(iter(found.values()))


def _by_id(ledger: Ledger, text: str, scope: Scope) -> Found | None:
    try:
        record = ledger.sessions.get_or_none(text)
    except InvalidIdError:  # not an agentledger id (a key may be any text)
        return None
    if record is None or not scope.holds(record.app_name, record.user_id):
        return None
    return Found(record.id, record.external_key, record.app_name, record.user_id, by="id")


def _by_key(ledger: Ledger, text: str, scope: Scope) -> list[Found]:
    page = ledger.sessions.list(
        external_key=text,
        app_name=scope.app_name,
        user_id=scope.user_id,
        include=["external_key"],
        limit=CANDIDATES_SHOWN + 1,
    )
    return [_found(item) for item in page.items]


def _found(item: SessionSummary) -> Found:
    return Found(item.id, item.external_key, item.app_name, item.user_id, by="key")


def _ambiguous(text: str, found: list[Found]) -> str:
    listed = "; ".join(_candidate(item) for item in found[:CANDIDATES_SHOWN])
    more = " and more" if len(found) > CANDIDATES_SHOWN else ""
    scopes = {(item.app_name, item.user_id) for item in found if item.by == "key"}
    narrow = ", or narrow the key with --app and --user" if len(scopes) > 1 else ""
    return (
        f"{shorten(clean(text), 80)!r} names {len(found)} sessions{more}: {listed}; "
        f"pass the agentledger id of the one you mean{narrow}"
    )


def _candidate(item: Found) -> str:
    if item.by == "id":
        return f"{item.id} (its agentledger id)"
    scope = f"app {_shown(item.app_name)}, user {_shown(item.user_id)}"
    return f"{item.id} (its key, {scope})"


def _shown(value: str | None) -> str:
    return "-" if value is None else repr(shorten(clean(value), 40))
