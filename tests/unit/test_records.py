"""Records: frozen, edited by copy, with a typed read of state values."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from agentledger import Ledger, ValidationError
from agentledger.records import SessionRecord


class Plan(BaseModel):
    destination: str
    days: int


@dataclass
class Budget:
    euros: int


@pytest.fixture
def record() -> SessionRecord:
    with Ledger.in_memory() as ledger:
        return ledger.sessions.create(
            "typed",
            state={
                "plan": {"destination": "Lisbon", "days": 3},
                "budget": {"euros": 900},
                "tags": ["a", "b"],
                "broken": {"destination": 1},
            },
        )


def test_records_are_frozen(record: SessionRecord) -> None:
    with pytest.raises(ValueError):
        record.title = "changed"  # type: ignore[misc]


def test_a_state_value_decodes_into_a_pydantic_model(record: SessionRecord) -> None:
    assert record.state_as("plan", Plan) == Plan(destination="Lisbon", days=3)


def test_a_state_value_decodes_into_a_dataclass_or_a_generic(record: SessionRecord) -> None:
    assert record.state_as("budget", Budget) == Budget(euros=900)
    assert record.state_as("tags", list[str]) == ["a", "b"]


def test_a_missing_key_gives_the_default_or_names_the_key(record: SessionRecord) -> None:
    assert record.state_as("absent", Plan, default=None) is None
    with pytest.raises(ValidationError) as raised:
        record.state_as("absent", Plan)
    assert raised.value.path == "state['absent']"


def test_a_value_that_does_not_fit_names_the_key(record: SessionRecord) -> None:
    with pytest.raises(ValidationError) as raised:
        record.state_as("broken", Plan)
    assert "state['broken']" in str(raised.value)
