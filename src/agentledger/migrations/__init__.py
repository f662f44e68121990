"""Run agentledger's migrations: find the shipped scripts, upgrade, check, render SQL.

The scripts are the top-level ``alembic/`` folder of the source tree; an installed
wheel carries the same files as the package resource ``agentledger/_migrations``.
Every entry point (the commands here, ``agentledger db``, plain ``alembic`` from a
checkout) goes through ``run_environment``, so each takes the same database lock,
writes the same version table (``agentledger_alembic_version``) and never touches a
host application's ``alembic_version``.

What lives where (the roles Alembic keeps apart):

- ``command``: the public commands: ``upgrade``, ``downgrade``, ``current``,
  ``check``, ``sql``, ``stamp``, ``upgrade_hint``.
- ``scripts``: the shipped scripts: ``script_location``, ``versions_location``,
  ``alembic_config``, ``head``, the revision order.
- ``environment``: the body of env.py, ``run_environment``: offline and online runs,
  the migration lock, refusing a database a host's Alembic manages, CREATE SCHEMA.
- ``compare``: what our autogenerate compares, and the shape check ``stamp`` makes
  before it adopts tables made with ``create_all``.
- ``version_table``: the revision a database records, in our version table or a
  host's.
- ``host``: for a host application's env.py: ``exclude_agentledger_names`` /
  ``exclude_agentledger_objects`` keep its autogenerate off our tables (separate
  stream, the default); ``check_host_config`` guards a host that mounts our versions
  in its own tree (single pipeline).
- ``target``: a command's ``Target`` (URL, Engine or Connection), connected, and
  its errors raised as agentledger's own.

Imports run one way, from ``command``, ``environment`` and ``host`` down through
``compare`` and ``version_table`` to ``scripts`` and ``target``; no module imports
this package. It re-exports every public name, so ``agentledger.migrations.upgrade``
is the spelling to use. From async code, hand a sync connection over with ``run_sync``::

    async with engine.connect() as connection:
        await connection.run_sync(agentledger.migrations.upgrade)
"""

from __future__ import annotations

from .command import check, current, downgrade, sql, stamp, upgrade, upgrade_hint
from .compare import include_agentledger_names
from .environment import run_environment
from .host import check_host_config, exclude_agentledger_names, exclude_agentledger_objects
from .locks import SQLITE_OFFLINE_REFUSAL
from .scripts import (
    SCHEMA_ATTRIBUTE,
    Revision,
    alembic_config,
    head,
    history,
    script_location,
    versions_location,
)
from .target import Target

__all__ = [
    "SCHEMA_ATTRIBUTE",
    "SQLITE_OFFLINE_REFUSAL",
    "Revision",
    "Target",
    "alembic_config",
    "check",
    "check_host_config",
    "current",
    "downgrade",
    "exclude_agentledger_names",
    "exclude_agentledger_objects",
    "head",
    "history",
    "include_agentledger_names",
    "run_environment",
    "script_location",
    "sql",
    "stamp",
    "upgrade",
    "upgrade_hint",
    "versions_location",
]
