"""Shared fixtures: the database fixtures live in tests/databases.py."""

from __future__ import annotations

from .databases import migrated_url as migrated_url
from .databases import scratch_url as scratch_url
