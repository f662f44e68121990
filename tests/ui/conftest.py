"""Where the browser test saved its screenshots, said at the end of the run."""

from __future__ import annotations

import pytest

SCREENSHOTS: list[str] = []
"""The folders screenshots were saved to in this run."""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for folder in SCREENSHOTS:
        terminalreporter.write_line(f"ui: browser screenshots saved in {folder}")
