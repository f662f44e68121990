"""Which framework a session belongs to is read from its id (agentledger.integrations)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentledger.ids import validate_id
from agentledger.integrations import (
    FRAMEWORKS,
    framework_id_prefix,
    framework_of,
    new_session_id,
)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_adapters_session_id_is_valid_and_names_its_framework(framework: str) -> None:
    session_id = new_session_id(framework)  # type: ignore[arg-type]
    assert validate_id(session_id) == session_id
    assert framework_of(session_id) == framework
    assert session_id.startswith(framework_id_prefix(framework))  # type: ignore[arg-type]


def test_ids_made_later_sort_after_ids_made_earlier() -> None:
    earlier = new_session_id("adk", datetime(2026, 1, 1, tzinfo=UTC))
    later = new_session_id("adk", datetime(2026, 1, 2, tzinfo=UTC))
    assert earlier < later


@pytest.mark.parametrize("session_id", ["trip-planner", "langgraph", "langgraphx.1", "adk-1"])
def test_any_other_id_belongs_to_no_framework(session_id: str) -> None:
    assert framework_of(session_id) is None


def test_an_unknown_framework_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown framework 'crewai'"):
        new_session_id("crewai")  # type: ignore[arg-type]
