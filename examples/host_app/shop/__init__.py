"""A small shop that shares its database with agentledger (see ../README.md)."""
