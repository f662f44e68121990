"""agentledger's Alembic environment: used by `alembic` from a checkout, by
`agentledger db ...` and by agentledger.migrations from an installed package.

All the logic lives in agentledger.migrations.run_environment, so every entry point
takes the same lock, writes the same version table and treats SQLite the same way.
"""

from alembic import context

from agentledger.migrations import run_environment

run_environment(context)
