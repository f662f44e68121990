#!/bin/sh
# The deploy step: the shop's migrations, then agentledger's, each in its own version
# table (alembic_version and agentledger_alembic_version). Safe to re-run.
set -eu
cd "$(dirname "$0")"
alembic -c alembic.ini upgrade head
agentledger db upgrade --url "$DATABASE_URL"
agentledger db check --url "$DATABASE_URL"
