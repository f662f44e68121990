"""Create agentledger's tables through its migrations, then print them.

    python examples/show_tables.py      # sqlite:///agentledger.db in the current folder
    AGENTLEDGER_DATABASE_URL=postgresql://user@host/db python examples/show_tables.py

The same as ``agentledger db upgrade`` followed by a look at what it made.
"""

from __future__ import annotations

from sqlalchemy import inspect
from sqlalchemy.pool import NullPool

from agentledger import migrations
from agentledger.engine import create_sync_engine, mask, resolve_url
from agentledger.models import TABLE_PREFIX


def main() -> None:
    url = resolve_url(None, asynchronous=False)
    migrations.upgrade(url)
    print(f"{mask(url)} is at revision {migrations.current(url)} (head {migrations.head()})\n")
    engine = create_sync_engine(url, poolclass=NullPool)
    try:
        inspector = inspect(engine)
        for table in sorted(inspector.get_table_names()):
            if not table.startswith(TABLE_PREFIX):
                continue
            print(table)
            for column in inspector.get_columns(table):
                required = "" if column["nullable"] else " NOT NULL"
                print(f"    {column['name']:<24} {column['type']}{required}")
            print()
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
