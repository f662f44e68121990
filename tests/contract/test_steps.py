"""The steps, usage and run-summary contract on every backend x mode."""

from agentledger.testing import (
    FinalizeContract,
    StepConcurrencyContract,
    StepContract,
    UsageContract,
)


class TestSteps(StepContract):
    pass


class TestUsage(UsageContract):
    pass


class TestFinalize(FinalizeContract):
    pass


class TestStepConcurrency(StepConcurrencyContract):
    pass
