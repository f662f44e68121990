"""The bulk-operations contract on every backend x mode."""

from agentledger.testing import BulkContract


class TestBulk(BulkContract):
    pass
