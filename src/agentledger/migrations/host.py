"""For a host application's own Alembic environment (its env.py).

Separate stream (the default): ``exclude_agentledger_names`` and
``exclude_agentledger_objects`` keep the host's autogenerate off our tables.
Single pipeline (the host mounts our revisions in its tree): ``check_host_config``
refuses a setup that would lose them or create the tables twice.
"""

from __future__ import annotations

import os
from typing import Any

from alembic.config import Config
from alembic.util.pyfiles import coerce_resource_to_filename
from sqlalchemy import Connection

from ..errors import SchemaError
from ..models import VERSION_TABLE
from .compare import is_ours
from .scripts import SCHEMA_ATTRIBUTE, versions_location
from .version_table import own_revision


def exclude_agentledger_names(name: str | None, type_: str, parents: Any) -> bool:
    """``include_name`` filter for a host application's env.py: everything but ours.

    With it the host's ``alembic revision --autogenerate`` (and ``alembic check``)
    never reflects agentledger's tables, their indexes or its version table, so it
    never proposes to drop or alter them. Combine it with a filter of your own by
    calling it from yours.
    """
    if type_ == "table":
        return not is_ours(name)
    return not is_ours(parents.get("table_name") if isinstance(parents, dict) else None)


def exclude_agentledger_objects(
    object_: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """``include_object`` filter for a host's env.py: everything but ours.

    Needed besides ``exclude_agentledger_names`` only when agentledger's tables are in
    the host's ``target_metadata`` (for foreign keys, say): then the host's
    autogenerate would otherwise propose to create them.
    """
    if type_ == "table":
        return not is_ours(name)
    parent = getattr(object_, "table", None)
    return not is_ours(getattr(parent, "name", None))


def check_host_config(config: Config, connection: Connection | None = None) -> None:
    """Refuse a host's Alembic setup that mounts agentledger's versions but would break.

    For the single pipeline: call it from the host's env.py with ``context.config``
    (and, online, the connection). Raises SchemaError when the host's
    ``version_locations`` does not reach this package's revisions (``path_separator =
    os`` silently drops ``agentledger:_migrations/versions``), when the PostgreSQL
    schema option is asked for (not available in this mode), or when agentledger's own
    stream already manages the database (the two modes must not be mixed).
    """
    if config.attributes.get(SCHEMA_ATTRIBUTE) is not None:
        raise SchemaError(
            "the PostgreSQL schema option is not available when a host's Alembic runs "
            "agentledger's revisions (single pipeline): they create the tables in the "
            "default schema",
            hint="remove the agentledger_schema attribute, or run agentledger's own "
            "stream instead: agentledger db upgrade --schema NAME",
        )
    problem = _mount_problem(config)
    if problem is not None:
        raise SchemaError(
            problem,
            hint="in the host's alembic.ini set `path_separator = space` and list "
            "`agentledger:_migrations/versions` (from an editable install: "
            f"{versions_location()}) in version_locations",
        )
    if connection is not None:
        _refuse_own_stream(connection)


def _mount_problem(config: Config) -> str | None:
    """Why the host's version_locations misses this package's revisions, or None."""
    ours = versions_location().resolve()
    for entry in config.get_version_locations_list() or []:
        try:
            if coerce_resource_to_filename(entry).resolve() == ours:
                return None
        except (ImportError, OSError, TypeError):
            continue
    raw = config.file_config.get(config.config_ini_section, "version_locations", fallback="")
    separator = config.get_main_option("path_separator") or ""
    resource = "agentledger:_migrations/versions"
    if "agentledger:" in raw and (separator == ":" or (separator == "os" and os.pathsep == ":")):
        return (
            f"the host's version_locations names {resource}, but `path_separator = "
            f"{separator}` splits it at ':' and Alembic silently finds none of "
            "agentledger's revisions"
        )
    if "agentledger:" in raw:
        return (
            f"{resource} does not exist in this installation (an editable install keeps "
            f"the scripts in the source tree, at {versions_location()})"
        )
    return "the host's version_locations does not include agentledger's revisions"


def _refuse_own_stream(connection: Connection) -> None:
    own = own_revision(connection)
    if own is not None:
        raise SchemaError(
            f"agentledger's own stream manages this database ({VERSION_TABLE} is at "
            f"{own}): running its revisions from the host's tree too would create the "
            "tables twice",
            current=own,
            hint="keep the separate stream (remove agentledger's versions from the host's "
            "version_locations and run `agentledger db upgrade`), or move to the single "
            f"pipeline: drop the table {VERSION_TABLE}, then `alembic stamp {own}`",
        )
