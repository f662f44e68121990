"""The only source of "now": an injectable clock so tests control time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from .errors import ValidationError

Clock = Callable[[], datetime]
"""A callable returning the current time as a timezone-aware datetime."""


def system_clock() -> datetime:
    """The wall clock in UTC, with microseconds."""
    return datetime.now(UTC)


def utc(value: datetime, *, field: str) -> datetime:
    """Return ``value`` converted to UTC; naive datetimes are refused.

    A naive datetime has no instant: guessing its zone is how rows end up out of order.
    """
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValidationError(
            f"{field} must be a timezone-aware datetime, got a naive one ({value.isoformat()})",
            path=field,
        )
    return value.astimezone(UTC)


def checked_now(clock: Clock) -> datetime:
    """Read ``clock`` and make sure it gives an aware datetime, in UTC."""
    return utc(clock(), field="clock()")


def format_time(value: datetime) -> str:
    """An aware datetime as ISO 8601 UTC with microseconds: ``2026-01-02T03:04:05.000006Z``."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
