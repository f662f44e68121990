"""The grants contract on every backend x mode."""

from agentledger.testing import GrantContract


class TestGrants(GrantContract):
    pass
