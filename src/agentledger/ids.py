"""Session id rules, time-sortable id generation and framework ids; pure, no I/O.

A session made by a framework adapter (``agentledger.integrations``) gets the id
``<framework>.<ULID>`` (the framework's own key is the session's external key), so the
CLI, the viewer and plain SQL can tell a LangGraph thread from an ADK session without
a column of their own: ``framework_of`` reads it back, ``framework_id_prefix`` is what
a ``LIKE`` filter matches.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from typing import Final, Literal, get_args

from .errors import InvalidIdError

MAX_ID_LENGTH = 128
_ID_PATTERN = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}")
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def validate_id(value: object, *, what: str = "session id") -> str:
    """Return ``value`` if it is a valid id, else raise InvalidIdError.

    Ids are 1 to 128 ASCII letters, digits, ``_``, ``-`` and ``.``, not starting
    with ``.``: safe in URLs, file names and logs, and identical on every collation.
    """
    if not isinstance(value, str):
        raise InvalidIdError(f"{what} must be a string, got {type(value).__name__}", value=value)
    if _ID_PATTERN.fullmatch(value) is None:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InvalidIdError(
            f"invalid {what} {shown!r}: use 1 to {MAX_ID_LENGTH} ASCII letters, digits, "
            "'_', '-' or '.', not starting with '.'",
            value=value,
        )
    return value


def new_id(now: datetime) -> str:
    """A 26-character ULID: 48 bits of milliseconds since the epoch, then 80 random bits.

    Ids made later sort after ids made earlier (to the millisecond), so a listing by
    id is roughly a listing by creation time.
    """
    millis = int(now.timestamp() * 1000)
    number = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[number & 31])
        number >>= 5
    return "".join(reversed(chars))


Framework = Literal["langgraph", "openai-agents", "adk"]
FRAMEWORKS: Final[tuple[Framework, ...]] = get_args(Framework)


def new_session_id(framework: Framework, now: datetime) -> str:
    """A new session id marked as made by ``framework``'s adapter, time-sortable by
    ``now`` (the ledger's clock)."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
    return f"{framework}.{new_id(now)}"


def framework_of(session_id: str) -> Framework | None:
    """The framework whose adapter made the session ``session_id``, None for any other."""
    prefix, dot, _ = session_id.partition(".")
    for framework in FRAMEWORKS:
        if dot and prefix == framework:
            return framework
    return None


def framework_id_prefix(framework: Framework) -> str:
    """The start every id of ``framework``'s sessions has (for ``id LIKE prefix || '%'``)."""
    return f"{framework}."
