"""What every command-line test reads: the one line an error prints."""

from __future__ import annotations


def one_error(err: str) -> str:
    """stderr's single line, ``agentledger: error: ...``, with no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("agentledger: error: ") and "Traceback" not in err
    return lines[0]
