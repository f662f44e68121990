"""The sessions contract on every backend x mode."""

from agentledger.testing import (
    ConcurrencyContract,
    ListingContract,
    SessionContract,
    UnitOfWorkContract,
)


class TestSessions(SessionContract):
    pass


class TestListing(ListingContract):
    pass


class TestUnitOfWork(UnitOfWorkContract):
    pass


class TestConcurrency(ConcurrencyContract):
    pass
