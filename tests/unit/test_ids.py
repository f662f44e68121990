"""Session id rules and generation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentledger import InvalidIdError
from agentledger.ids import new_id, validate_id


@pytest.mark.parametrize("good", ["a", "A-1", "x" * 128, "snake_case.v2", "-dash", "0"])
def test_valid_ids_pass(good: str) -> None:
    assert validate_id(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "x" * 129,
        ".dot",
        "sp ace",
        "tab\t",
        "nl\n",
        "end\n",
        "é",
        "\u200b",
        "a/b",
        "a\\b",
        "a:b",
        "%s",
        "?",
        "'",
        '"',
        ";",
        "\x00",
    ],
    ids=repr,
)
def test_invalid_ids_raise_invalid_id_error(bad: str) -> None:
    with pytest.raises(InvalidIdError) as raised:
        validate_id(bad)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize("bad", [None, 1, b"bytes"])
def test_non_strings_raise_invalid_id_error(bad: object) -> None:
    with pytest.raises(InvalidIdError):
        validate_id(bad)


def test_generated_ids_are_valid_and_sort_by_creation_time() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [new_id(start + timedelta(milliseconds=step)) for step in range(0, 5000, 7)]
    assert ids == sorted(ids)
    assert all(validate_id(value) == value and len(value) == 26 for value in ids)
    assert len(set(new_id(start) for _ in range(1000))) == 1000
