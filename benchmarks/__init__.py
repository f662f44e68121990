"""agentledger's benchmark: its public async API against a SQLAlchemy Core floor and a
raw-driver floor doing the same durable work, on SQLite, PostgreSQL and MariaDB.

Run it with ``python3 dev.py bench`` (the recorded run) or ``python3 dev.py bench
--quick`` (a smoke run of a few seconds per database); see docs/benchmarks.md.
"""
