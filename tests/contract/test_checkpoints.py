"""The checkpoints contract on every backend x mode."""

from agentledger.testing import (
    CheckpointConcurrencyContract,
    CheckpointContract,
    CheckpointExpiryContract,
)


class TestCheckpoints(CheckpointContract):
    pass


class TestCheckpointExpiry(CheckpointExpiryContract):
    pass


class TestCheckpointConcurrency(CheckpointConcurrencyContract):
    pass
