"""The shop's Alembic environment, sharing its database with agentledger.

The two filters keep the shop's autogenerate (and `alembic check`) off agentledger's
tables, indexes and version table; without them it would propose dropping them all.
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from shop.models import Base
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from agentledger.migrations import exclude_agentledger_names, exclude_agentledger_objects

OPTIONS = {
    "target_metadata": Base.metadata,
    "include_name": exclude_agentledger_names,
    "include_object": exclude_agentledger_objects,
    "compare_type": True,
    "render_as_batch": True,  # SQLite rebuilds tables to alter them
}


def run() -> None:
    if context.config.config_file_name is not None:
        fileConfig(context.config.config_file_name)
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ["DATABASE_URL"]
    if context.is_offline_mode():
        context.configure(url=url, literal_binds=True, **OPTIONS)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, **OPTIONS)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run()
