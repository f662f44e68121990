"""Print the reliability figures at the end of the run."""

from __future__ import annotations

import pytest

from . import summary


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if summary.FIGURES:
        terminalreporter.section("agentledger reliability summary")
        for line in summary.lines():
            terminalreporter.write_line(line)
