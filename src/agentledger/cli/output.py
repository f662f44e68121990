"""How the commands print: lines on stdout and stderr, aligned tables, the progress
line, counts, byte sizes, times, and text made safe for a terminal.

Tables and summaries go to stdout; progress goes to stderr only when it is a terminal,
so piped output stays quiet.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import IO

from ..transfer import Progress

PROG = "agentledger"
TITLE_WIDTH = 48
"""Characters of a session title shown in a one-line listing."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls (escape sequences start with ESC or CSI) and the invisible
characters that reorder or hide text on a terminal (bidirectional overrides)."""

ProgressCallback = Callable[[Progress], None]
"""What a long operation calls with how far it is."""


def say(message: str) -> None:
    """One line on stdout."""
    print(message)


def warn(message: str) -> None:
    """``agentledger: message`` on stderr: a finding that is not the command's failure."""
    print(f"{PROG}: {message}", file=sys.stderr)


def error(message: str) -> None:
    """``agentledger: error: message`` on stderr."""
    print(f"{PROG}: error: {message}", file=sys.stderr)


def table(
    header: list[str], rows: list[list[str]], *, right: set[int] | None = None, indent: str = ""
) -> None:
    """Rows under a header on stdout, in columns as wide as their widest cell; the
    columns numbered in ``right`` are aligned right (numbers)."""
    right = right or set()
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def render(cells: list[str]) -> str:
        parts = [
            cell.rjust(width) if index in right else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return (indent + "  ".join(parts)).rstrip()

    say(render(header))
    for row in rows:
        say(render(row))


# --- progress -----------------------------------------------------------------------------


class ProgressLine:
    """A one-line progress display on a terminal's stderr, redrawn at most 10 times a second."""

    def __init__(self, label: str, stream: IO[str], unit: str | None) -> None:
        self._label = label
        self._stream = stream
        self._unit = unit
        self._last = 0.0
        self._drawn = False

    def __call__(self, progress: Progress) -> None:
        """Redraw the line, unless it was drawn less than 0.1 s ago."""
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        self._stream.write(f"\r{self._label}: {self._text(progress)}\x1b[K")
        self._stream.flush()
        self._drawn = True

    def _text(self, progress: Progress) -> str:
        unit = self._unit or progress.unit
        if progress.unit == "bytes":
            done = byte_size(progress.done)
            total = f" of {byte_size(progress.total)}" if progress.total else ""
            return f"{done}{total}" + _percent(progress)
        total = f"/{progress.total:,}" if progress.total is not None else ""
        return f"{progress.done:,}{total} {unit}" + _percent(progress)

    def close(self) -> None:
        """Clear the line, so what is printed next starts on a clean one."""
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()


def _percent(progress: Progress) -> str:
    if not progress.total:
        return ""
    return f"  {min(100, progress.done * 100 // progress.total)}%"


@contextmanager
def progress_line(
    label: str, *, unit: str | None = None, enabled: bool = True
) -> Iterator[ProgressCallback | None]:
    """A progress callback drawing on stderr when it is a terminal, else None.

    ``unit`` replaces the unit the operation reports (``deleted`` for a purge's rows).
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    line = ProgressLine(label, sys.stderr, unit)
    try:
        yield line
    finally:
        line.close()


# --- values as text -----------------------------------------------------------------------


def count(number: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def shown(number: int, total: int, which: str) -> str:
    """`` (last 20 shown)`` when a listing holds fewer than all; else nothing."""
    return f" ({which} {number:,} shown)" if number < total else ""


def content_text(content: object) -> str:
    """A message's content as text: a string as it is, anything else as JSON."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def clean(text: str | None) -> str:
    """Text safe to print on a terminal: control characters (escape sequences) shown
    as escapes, never interpreted."""
    if not text:
        return text or ""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


def shorten(text: str, width: int) -> str:
    """At most ``width`` characters, ending in ``…`` when cut; below 100 characters
    wide, runs of white space (newlines too) become one space."""
    text = " ".join(text.split()) if width < 100 else text
    return text if len(text) <= width else text[: width - 1] + "…"


def when(value: datetime) -> str:
    """A time in UTC to the second: ``2026-03-02 09:15:00``."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def byte_size(number: int) -> str:
    """A size for people: ``512 B``, ``1.5 KiB``, ``3.2 MiB``, ``1.0 GiB``."""
    size = float(number)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
