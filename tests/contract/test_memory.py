"""The long-term memory contract on every backend x mode."""

from agentledger.testing import MemoryConcurrencyContract, MemoryContract, MemoryExpiryContract


class TestMemory(MemoryContract):
    pass


class TestMemoryExpiry(MemoryExpiryContract):
    pass


class TestMemoryConcurrency(MemoryConcurrencyContract):
    pass
