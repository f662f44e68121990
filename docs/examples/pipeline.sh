#!/bin/sh
# A deploy pipeline's agentledger steps: review, apply, gate.
set -eu

# 1. For the DBA: the SQL an upgrade from 0001 runs. Nothing connects; the URL only
#    names the dialect (postgresql:// or mysql://; not SQLite).
agentledger db sql --url postgresql:// --from agentledger_0001 > agentledger-upgrade.sql

# 2. Before the new code deploys (EXPAND revisions are safe then). A no-op when the
#    database is already at head; concurrent runs take turns on a database lock.
agentledger db upgrade --url "$DATABASE_URL"

# 3. The gate: exit 3, naming the revision the database is at and the one it needs,
#    unless it is at this package's head.
agentledger db check --url "$DATABASE_URL"
