"""CHANGES.md names every shipped migration with its deploy kind, as ``db history``
reads it from the migration itself: the upgrade notes cannot drift from the code."""

from __future__ import annotations

from pathlib import Path

from agentledger import migrations

CHANGES = Path(__file__).resolve().parents[2] / "CHANGES.md"


def test_the_changelog_lists_every_migration_with_its_deploy_kind() -> None:
    text = CHANGES.read_text()
    for each in migrations.history():
        assert f"- `{each.revision}` ({each.deploy}): {each.title}" in text, each.revision


def test_the_license_is_the_one_pyproject_names() -> None:
    root = CHANGES.parent
    assert 'license = "MIT"' in (root / "pyproject.toml").read_text()
    assert (root / "LICENSE").read_text().startswith("MIT License")
