"""The keys contract (external session keys, idempotent appends) on every backend x mode."""

from agentledger.testing import IdempotentAppendContract, SessionKeyContract


class TestSessionKeys(SessionKeyContract):
    pass


class TestIdempotentAppends(IdempotentAppendContract):
    pass
