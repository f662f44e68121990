"""LangGraph's stored values decoded for display, never for use.

LangGraph's serializer (``JsonPlusSerializer``) writes a value as a type tag and bytes:
``msgpack`` by default, ``json`` in older checkpoints, ``pickle`` only when a graph
turns its pickle fallback on. The viewer shows the first two as JSON and any other as
its type and size:

- ``json`` is parsed as plain JSON. ``JsonPlusSerializer.loads_typed`` would also
  revive LangChain's constructor envelopes (``{"lc": 2, "type": "constructor", ...}``)
  by importing and calling the class they name; here they stay the dicts they are.
- ``msgpack`` goes through ``JsonPlusSerializer`` with an extension hook of ours in
  place of its own, which imports the module an object names and calls its class (or a
  method of it) with the stored arguments. Ours imports nothing: an object is shown as
  ``{"__class__": "module.Name", ...}`` with its stored fields, arguments or value.
- ``pickle`` is never loaded: the serializer is built without its pickle fallback and
  is handed only ``msgpack``.

Without LangGraph installed, a ``msgpack`` value is shown as its type and size.
Whatever is decoded is made JSON-safe (text keys, lists, finite numbers, bytes as their
size) and cut below ``MAX_DEPTH`` levels, so the JSON answers can carry it too.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any, NamedTuple

DECODED_TYPES = ("json", "msgpack")
"""The type tags shown decoded; any other is shown as its type and size."""
CLASS_KEY = "__class__"
"""The key naming the class of an object a msgpack value holds (``module.Name``)."""
MAX_DEPTH = 40
"""Levels of nesting shown; deeper values are replaced by ``…``."""

# LangGraph's msgpack extension codes (langgraph.checkpoint.serde.jsonplus), as stored.
_SINGLE_ARG, _POSITIONAL, _KEYWORDS, _METHOD, _PYDANTIC_V1, _PYDANTIC_V2 = range(6)
_NUMPY_ARRAY, _DELTA_SNAPSHOT = 6, 7


class Shown(NamedTuple):
    """A stored value as the viewer shows it."""

    decoded: bool
    """Whether ``value`` is the decoded value (else show the type and size)."""
    value: Any
    """The value, JSON-safe; None when not decoded."""


NOT_SHOWN = Shown(decoded=False, value=None)


def shown(type_tag: str, data: bytes | None) -> Shown:
    """The value of type ``type_tag`` (``+zlib`` dropped: ``data`` comes decompressed)
    stored as ``data`` (None: its bytes were not read), decoded when its type is one of
    ``DECODED_TYPES`` and it decodes; else ``NOT_SHOWN``. ``null`` is None, decoded."""
    kind = type_tag.removesuffix("+zlib")
    if kind == "null":
        return Shown(decoded=True, value=None)
    if data is None or kind not in DECODED_TYPES:
        return NOT_SHOWN
    try:
        if kind == "json":
            value = json.loads(data)
        else:
            loads = _msgpack_loads()
            if loads is None:
                return NOT_SHOWN
            value = loads(data)
        return Shown(decoded=True, value=displayable(value))
    except (ValueError, TypeError, RecursionError):
        return NOT_SHOWN


@functools.cache
def _msgpack_loads() -> Callable[[bytes], Any] | None:
    """LangGraph's msgpack decoding with ``described`` for its objects; None without
    LangGraph."""
    try:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    except ImportError:
        return None
    serializer = JsonPlusSerializer(pickle_fallback=False, __unpack_ext_hook__=described)

    def loads(data: bytes) -> Any:
        return serializer.loads_typed(("msgpack", data))

    return loads


def described(code: int, data: bytes) -> Any:
    """A msgpack extension (an object LangGraph's serializer wrote) as a description:
    its class's dotted name and what was stored to rebuild it. Nothing is imported or
    called; an extension this does not know is shown as its code and size."""
    import ormsgpack

    unknown = {CLASS_KEY: f"msgpack extension {code}", "size": len(data)}
    inner = ormsgpack.unpackb(data, ext_hook=described, option=ormsgpack.OPT_NON_STR_KEYS)
    if code == _DELTA_SNAPSHOT:
        return inner
    if code == _NUMPY_ARRAY:
        if isinstance(inner, list | tuple) and len(inner) == 4:
            return {CLASS_KEY: "numpy.ndarray", "dtype": inner[0], "shape": inner[1]}
        return unknown
    if code not in (_SINGLE_ARG, _POSITIONAL, _KEYWORDS, _METHOD, _PYDANTIC_V1, _PYDANTIC_V2):
        return unknown
    if not (
        isinstance(inner, list | tuple)
        and len(inner) >= 3
        and isinstance(inner[0], str)
        and isinstance(inner[1], str)
    ):
        return unknown
    module, name, stored = inner[0], inner[1], inner[2]
    if code == _POSITIONAL:
        return {CLASS_KEY: f"{module}.{name}", "args": stored}
    if code in (_SINGLE_ARG, _METHOD):
        return {CLASS_KEY: f"{module}.{name}", "value": stored}
    return {CLASS_KEY: f"{module}.{name}", "fields": stored}


def displayable(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON can carry it: text keys, lists for tuples and sets, non-finite
    numbers as text, bytes as their size, nothing below ``MAX_DEPTH`` levels."""
    if depth >= MAX_DEPTH:
        return "…"
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {
            key if isinstance(key, str) else json.dumps(displayable(key, depth + 1)): displayable(
                item, depth + 1
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [displayable(item, depth + 1) for item in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return {CLASS_KEY: "bytes", "size": len(bytes(value))}
    return {CLASS_KEY: f"{type(value).__module__}.{type(value).__qualname__}"}
