"""A host's Alembic environment that also runs agentledger's revisions (single pipeline)."""

from __future__ import annotations

import os

from alembic import context
from helpdesk import metadata
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from agentledger.migrations import (
    check_host_config,
    exclude_agentledger_names,
    exclude_agentledger_objects,
)

OPTIONS = {
    "target_metadata": metadata,
    "include_name": exclude_agentledger_names,  # autogenerate never drops our tables
    "include_object": exclude_agentledger_objects,
    "compare_type": True,
}


def run() -> None:
    # Refuses a version_locations that lost agentledger's revisions, and the schema option.
    check_host_config(context.config)
    url = os.environ["DATABASE_URL"]
    if context.is_offline_mode():
        context.configure(url=url, literal_binds=True, **OPTIONS)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as connection:
        # Refuses a database that agentledger's own stream already manages.
        check_host_config(context.config, connection)
        context.configure(connection=connection, **OPTIONS)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run()
