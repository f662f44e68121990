"""The export file: JSON Lines written atomically, read back whether gzipped or not.

Every blocking file call goes through the ledger's ``Waits.offload``: under the sync
API it simply runs; under the async API it runs in a worker thread, so an export or
import never blocks the event loop with file or gzip I/O.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from .._concurrency import Waits
from ..errors import ValidationError

FORMAT_VERSION = 4
"""The export format this package writes and the newest it reads (3 added LangGraph's
tables, 4 long-term memory; a file of an earlier version has none of their lines)."""
ADDED_IN_2 = {kind: {"external_key": None} for kind in ("session", "message", "step")}
"""Columns format 2 added to rows of format 1, with the value a format 1 row means."""
HEADER_KEY = "agentledger_export"
END_KEY = "end"
READ_BYTES = 1 << 20
"""Lines are read in blocks of about this many bytes (one worker-thread hop each)."""

Destination = str | os.PathLike[str] | IO[str]
"""Where an export goes: a path (``.gz`` compresses) or an open text stream."""
Source = str | os.PathLike[str] | IO[bytes] | IO[str]
"""What an import reads: a path (gzip is detected) or an open stream."""

_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Characters some readers take for line breaks (Python's str.splitlines, JavaScript):
escaped, so that a line of the file is a line for every tool."""


def line(key: str, value: Any) -> str:
    """One line of the file: ``{key: value}`` as compact UTF-8 JSON."""
    text = json.dumps({key: value}, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.translate(_LINE_BREAKS) + "\n"


def decode_line(text: bytes | str, number: int) -> tuple[str, Any]:
    """The (kind, value) of a line; ValidationError naming the line when it is not one."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValidationError(f"line {number}: not JSON ({error})") from None
    if type(value) is not dict or len(value) != 1:
        raise ValidationError(
            f'line {number}: expected an object with one key, such as {{"session": {{...}}}}'
        )
    ((key, data),) = value.items()
    return key, data


def check_header(text: bytes | str | None) -> dict[str, Any]:
    """The header of an export from its first line; ValidationError when it is none."""
    problem = (
        "not an agentledger export: its first line is not the header "
        f'{{"{HEADER_KEY}": {{"version": {FORMAT_VERSION}, ...}}}}'
    )
    if text is None:
        raise ValidationError(f"{problem} (the file is empty)")
    try:
        key, header = decode_line(text, 1)
    except ValidationError:
        raise ValidationError(problem) from None
    if key != HEADER_KEY or type(header) is not dict:
        raise ValidationError(problem)
    version = header.get("version")
    if type(version) is not int or version < 1:
        raise ValidationError(
            f"line 1: the header's version must be a positive int, got {version!r}"
        )
    if version > FORMAT_VERSION:
        raise ValidationError(
            f"this export is format version {version}, newer than this agentledger reads "
            f"({FORMAT_VERSION}): upgrade agentledger to import it"
        )
    return header


class Sink:
    """A text stream written through the ledger's ``Waits.offload``."""

    def __init__(self, stream: IO[str], waits: Waits) -> None:
        self._stream = stream
        self._waits = waits

    def write(self, text: str) -> None:
        """Write ``text`` (a whole batch of lines: one hop)."""
        self._waits.offload(self._stream.write, text)


@contextmanager
def written(destination: Destination, waits: Waits) -> Iterator[tuple[Sink, str | None]]:
    """A sink for ``destination`` and its path; a path is written under a temporary
    name and renamed when the export is complete, so a file of that name is never a
    partial export. A device or a pipe is written in place."""
    if not isinstance(destination, str | os.PathLike):
        yield Sink(destination, waits), None
        return
    path = os.fspath(destination)
    if waits.offload(_is_special, path):
        stream = waits.offload(_open_for_writing, path, path.endswith(".gz"))
        try:
            yield Sink(stream, waits), path
        finally:
            waits.offload(stream.close)
        return
    partial = f"{path}.partial"
    stream = waits.offload(_open_for_writing, partial, path.endswith(".gz"))
    try:
        yield Sink(stream, waits), path
        waits.offload(stream.close)
    except BaseException:
        waits.offload(_discard, stream, partial)
        raise
    waits.offload(os.replace, partial, path)


def _is_special(path: str) -> bool:
    """Whether ``path`` is a device, a pipe or a socket (``/dev/null``, ``/dev/stdout``,
    a named pipe): written in place, since renaming a file over it would replace the
    device itself (as root, ``/dev/null`` with a regular file)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _open_for_writing(path: str, compressed: bool) -> IO[str]:
    if compressed:
        return gzip.open(path, "wt", encoding="utf-8", newline="\n")
    return open(path, "w", encoding="utf-8", newline="\n")


def _discard(stream: IO[str], partial: str) -> None:
    stream.close()
    if os.path.exists(partial):
        os.remove(partial)


@contextmanager
def read_lines(source: Source, waits: Waits) -> Iterator[tuple[Iterator[bytes | str], int | None]]:
    """The lines of ``source`` and its size in bytes when known (a gzip file: None)."""
    if not isinstance(source, str | os.PathLike):
        yield _blocks(source, waits), None
        return
    raw: IO[bytes] = waits.offload(open, source, "rb")
    try:
        size: int | None = waits.offload(lambda: os.fstat(raw.fileno()).st_size)
        if waits.offload(_is_gzip, raw):
            yield _blocks(gzip.GzipFile(fileobj=raw, mode="rb"), waits), None
        else:
            yield _blocks(raw, waits), size
    finally:
        waits.offload(raw.close)


def _is_gzip(raw: IO[bytes]) -> bool:
    magic = raw.read(2)
    raw.seek(0)
    return magic == b"\x1f\x8b"


def _blocks(stream: IO[bytes] | IO[str] | gzip.GzipFile, waits: Waits) -> Iterator[bytes | str]:
    while True:
        block: list[Any] = waits.offload(stream.readlines, READ_BYTES)
        if not block:
            return
        yield from block
