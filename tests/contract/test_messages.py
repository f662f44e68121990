"""The messages contract on every backend x mode."""

from agentledger.testing import MessageConcurrencyContract, MessageContract


class TestMessages(MessageContract):
    pass


class TestMessageConcurrency(MessageConcurrencyContract):
    pass
