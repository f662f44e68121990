"""The long-term memory contract on every backend x mode."""

from agentledger.testing import (
    MemoryConcurrencyContract,
    MemoryContract,
    MemoryExpiryContract,
    MemoryKeywordContract,
)


class TestMemory(MemoryContract):
    pass


class TestMemoryExpiry(MemoryExpiryContract):
    pass


class TestMemoryKeywords(MemoryKeywordContract):
    pass


class TestMemoryConcurrency(MemoryConcurrencyContract):
    pass
