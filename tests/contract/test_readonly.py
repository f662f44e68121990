"""The read-only unit of work contract on every backend x mode."""

from agentledger.testing import ReadOnlyUnitOfWorkContract


class TestReadOnlyUnitOfWork(ReadOnlyUnitOfWorkContract):
    pass
