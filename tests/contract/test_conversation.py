"""The conversation contract (pop, time, state with an append, steps by run and kind)
on every backend x mode."""

from agentledger.testing import (
    AppendResultContract,
    AppendWithStateContract,
    ConversationReadContract,
    MessageTimeContract,
    PopContract,
    StepQueryContract,
)


class TestAppendResult(AppendResultContract):
    pass


class TestPop(PopContract):
    pass


class TestMessageTime(MessageTimeContract):
    pass


class TestAppendWithState(AppendWithStateContract):
    pass


class TestStepQueries(StepQueryContract):
    pass


class TestConversationRead(ConversationReadContract):
    pass
