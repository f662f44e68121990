#!/bin/sh
# Adopt tables that metadata.create_all made (no migrations so far).
set -eu

# Compares the tables with the revision's schema first: any difference is named and
# nothing is recorded. A table shape from an older release names its revision.
agentledger db stamp --url "$DATABASE_URL"

# From now on the tables upgrade like everyone else's.
agentledger db upgrade --url "$DATABASE_URL"
