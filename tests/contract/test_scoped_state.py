"""The app and user state contract on every backend x mode."""

from agentledger.testing import ScopedStateConcurrencyContract, ScopedStateContract


class TestScopedState(ScopedStateContract):
    pass


class TestScopedStateConcurrency(ScopedStateConcurrencyContract):
    pass
