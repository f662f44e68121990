"""The revision scripts this package ships: where they are, their Alembic Config, their order."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TextIO

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from ..errors import SchemaError, ValidationError

SCHEMA_ATTRIBUTE = "agentledger_schema"
"""Config.attributes key the revision scripts read the PostgreSQL schema from."""


def script_location() -> Path:
    """The folder holding env.py and versions/: the package resource when installed
    from a wheel, else the source tree's top-level ``alembic/``."""
    packaged = resources.files("agentledger") / "_migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    source_tree = Path(__file__).resolve().parents[3] / "alembic"
    if (source_tree / "env.py").is_file():
        return source_tree
    raise SchemaError(
        "agentledger's migration scripts are missing from this installation",
        hint="reinstall agentledger (pip install --force-reinstall agentledger)",
    )


def versions_location() -> Path:
    """The folder of agentledger's revision scripts, for a host's ``version_locations``.

    From a wheel it is also reachable as the package resource
    ``agentledger:_migrations/versions``; an editable install has only this path.
    """
    return script_location() / "versions"


def alembic_config(
    *,
    schema: str | None = None,
    output_buffer: TextIO | None = None,
    connection: Connection | None = None,
) -> Config:
    """An Alembic Config for agentledger's scripts, built in code (no ini file needed).

    ``output_buffer`` receives offline (``--sql``) output instead of stdout;
    ``connection``, when given, is the one the migrations run on (Alembic's
    connection-sharing recipe: env.py uses it and leaves it open).
    """
    config = Config(output_buffer=output_buffer)
    config.set_main_option("script_location", str(script_location()))
    config.attributes[SCHEMA_ATTRIBUTE] = schema
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def head() -> str:
    """The newest revision this package ships."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise SchemaError(f"agentledger's migrations have {len(heads)} heads: {heads}")
    return heads[0]


@cache
def revision_order() -> tuple[str, ...]:
    """Our revisions, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return tuple(reversed([rev.revision for rev in script.walk_revisions()]))


@dataclass(frozen=True)
class Revision:
    """One shipped migration, as ``agentledger db history`` lists it."""

    revision: str
    title: str
    """The first line of its docstring."""
    deploy: str
    """``EXPAND`` (safe before the code that needs it is deployed) or ``CONTRACT``
    (only after every process runs code that no longer needs what it removes)."""
    note: str
    """Why that kind: its ``Deploy:`` paragraph after the word, up to its ``Why:``."""


@cache
def history() -> tuple[Revision, ...]:
    """Every shipped migration, oldest first, with its deploy kind."""
    script = ScriptDirectory.from_config(alembic_config())
    found = []
    for revision in revision_order():
        doc = script.get_revision(revision).module.__doc__ or ""
        title = " ".join(doc.strip().split("\n\n")[0].split()) or revision
        paragraph = next((p for p in doc.split("\n\n") if p.strip().startswith("Deploy:")), "")
        words = " ".join(paragraph.split()).removeprefix("Deploy:").strip()
        deploy, _, note = words.partition(".")
        note = note.split(" Why:")[0]  # the reasoning behind the kind; the why is the docs'
        found.append(Revision(revision, title, deploy.strip(), note.strip()))
    return tuple(found)


def is_known(revision: str) -> bool:
    """Whether ``revision`` is one this package ships."""
    return revision in revision_order()


def resolve_revision(revision: str) -> str:
    """The revision ``revision`` names (``head`` or ``heads`` is the newest).

    Raises:
        ValidationError: not a revision this package ships.
    """
    if revision in ("head", "heads"):
        return head()
    if not is_known(revision):
        raise ValidationError(
            f"unknown agentledger revision {revision!r}; known: {', '.join(revision_order())}",
            path="revision",
        )
    return revision
