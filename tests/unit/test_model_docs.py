"""The docstring under each mapped column is what ``help()`` and editors show."""

from __future__ import annotations

import pydoc

import pytest

from agentledger import AgentStep
from agentledger.models import metadata


def test_help_on_an_orm_class_shows_its_column_docstrings() -> None:
    text = pydoc.render_doc(AgentStep, renderer=pydoc.plaintext)
    assert "Position in the session's trace" in text
    assert AgentStep.seq.__doc__ is not None and AgentStep.seq.__doc__.startswith("Position")


@pytest.mark.parametrize("table", sorted(metadata.tables), ids=str)
def test_every_column_carries_its_docstring(table: str) -> None:
    undocumented = [column.name for column in metadata.tables[table].c if not column.doc]
    assert undocumented == []
