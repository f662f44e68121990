"""Ports of 127.0.0.1 for tests: one nothing listens on (yet)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on: free for a server a test starts, and
    refusing connections until one does."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
